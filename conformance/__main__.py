"""Command line: `python -m conformance run|report|compare|spec`.

  run --impl NAME [--out DIR] [-- pytest args]   run the suite, print and write the report
  report FILE.json                               print a report as Markdown
  compare A.json B.json [...]                    clause x implementation table
  spec [--out docs/spec] [--check]               write (or check) the readable spec
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _run(args) -> int:
    import subprocess

    checks = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checks")
    out = args.out or "reports"
    # A fresh interpreter, so pytest can rewrite the asserts of the (not yet imported) suite.
    cmd = [sys.executable, "-m", "pytest", checks, "--impl", args.impl,
           "--conformance-report", out, "-o", "python_files=check_*.py",
           "-o", "python_functions=check_*", "-p", "no:cacheprovider", "-q", *args.pytest_args]
    # Expected failures (xfail) are not failures; a failing or hanging check is.
    return subprocess.call(cmd)


def _report(args) -> int:
    from conformance import report

    with open(args.file) as f:
        sys.stdout.write(report.markdown(json.load(f)))
    return 0


def _compare(args) -> int:
    from conformance import report

    reports = []
    for path in args.files:
        with open(path) as f:
            reports.append(json.load(f))
    sys.stdout.write(report.compare(reports))
    return 0


def _spec(args) -> int:
    from conformance import spec

    if args.check:
        stale = spec.stale(args.out)
        for name in stale:
            print(f"out of date: {os.path.join(args.out, name)}", file=sys.stderr)
        if stale:
            print("regenerate with: python -m conformance spec", file=sys.stderr)
        return 1 if stale else 0
    for path in spec.write(args.out):
        print(path)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the suite against an implementation")
    p.add_argument("--impl", default=os.environ.get("TRAINSPEC_IMPL", "reference"))
    p.add_argument("--out", default=None, help="report folder (default: reports/)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p.set_defaults(fn=_run)
    p = sub.add_parser("report", help="print a JSON report as Markdown")
    p.add_argument("file")
    p.set_defaults(fn=_report)
    p = sub.add_parser("compare", help="compare reports side by side")
    p.add_argument("files", nargs="+")
    p.set_defaults(fn=_compare)
    p = sub.add_parser("spec", help="write docs/spec from the catalogue")
    p.add_argument("--out", default=os.path.join("docs", "spec"))
    p.add_argument("--check", action="store_true", help="fail if docs/spec is out of date")
    p.set_defaults(fn=_spec)
    args = parser.parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
