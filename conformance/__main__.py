"""Command line: `python -m conformance run|report|compare|spec|matrix`.

  run --impl NAME [--out DIR] [-- pytest args]   run the suite, print and write the report
  report FILE.json [--html PATH]                 print a report as Markdown
  compare A.json B.json [...] [--html PATH]      clause x implementation table
  spec [--out docs/spec] [--check]               write (or check) the readable spec
  matrix [--impl ...] [--faults ...] [...]       fault kind x job x implementation matrix

`python -m conformance SUBCOMMAND --help` describes each one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PROG = "python -m conformance"


class _Help(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions as written and ends each option's help with its default, unless the
    help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default is argparse.SUPPRESS or not action.option_strings:
            return text
        default = action.default
        shown = "off" if default is False else "on" if default is True else default
        return f"{text} (default: {shown})"


def _wrapped(text: str) -> str:
    import textwrap

    return textwrap.fill(" ".join(text.split()), 88)


def _error(command: str, message: str) -> int:
    print(f"{PROG} {command}: error: {message}", file=sys.stderr)
    return 2


def _run(args) -> int:
    import subprocess

    from conformance import adapters

    # Refuse bad options, then a bad --impl, here, in one line, before pytest starts (the
    # plugin refuses them too, for `pytest conformance/ --impl ...`). Options first: a
    # misused option is the error to name even where the implementation is not installed.
    try:
        adapters.check_cluster_options(args.impl, args.sim_provider, args.ray_address,
                                       args.allow_node_faults)
    except ValueError as exc:
        return _error("run", str(exc))
    try:
        adapters.resolve(args.impl)
    except adapters.LOAD_ERRORS as exc:
        return _error("run", str(exc))
    try:
        from conformance.adapters.reference_adapter import sim_provider

        workers = _workers(args.workers, args.impl, args.pytest_args,
                           sim_provider(args.sim_provider))
    except ValueError as exc:
        return _error("run", str(exc))
    checks = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checks")
    # A fresh interpreter, so pytest can rewrite the asserts of the (not yet imported) suite.
    cmd = [sys.executable, "-m", "pytest", checks, "--impl", args.impl,
           "--conformance-report", args.out, "-o", "python_files=check_*.py",
           "-o", "python_functions=check_*", "-p", "no:cacheprovider", "-q"]
    if args.sim_provider:
        cmd += ["--sim-provider", args.sim_provider]
    if args.ray_address:
        cmd += ["--ray-address", args.ray_address]
    if args.allow_node_faults:
        cmd += ["--allow-node-faults"]
    if workers > 1:
        # file by file: a file's checks share runs (`scenarios.shared`) and frameworks;
        # in the plugin's order (`plugin.run_order`), not xdist's
        cmd += ["-n", str(workers), "--dist", "loadfile", *_keep_order()]
    if args.progress != "off":
        # progress on stderr; pytest's own per-check letters are blanked by the plugin and
        # its percentage column is dropped, so nothing else writes while a check runs
        cmd += ["--conformance-progress", "--conformance-progress-style", args.progress,
                "-o", "console_output_style=classic"]
    # Expected failures (xfail) are not failures; a failing or hanging check is.
    return subprocess.call([*cmd, *args.pytest_args])


#: the most processes `--workers auto` splits the checks over
AUTO_WORKERS_MAX = 4


def _workers(value: str, impl: str, pytest_args: list, provider: str = "process") -> int:
    """How many pytest-xdist processes run the checks. 'auto': one per CPU, at most
    AUTO_WORKERS_MAX, for the reference on simcluster's process provider where
    pytest-xdist is installed (its checks are CPU-bound and each process starts a default
    cluster and the frameworks of its files once); 1 for any other implementation (a Ray
    session per process costs more than it saves), for the netns and docker providers
    (their networks are made one cluster at a time), and where the pytest arguments choose
    for themselves (-n, --dist, -p no:xdist)."""
    import importlib.util

    chosen = any(a in ("-n", "--numprocesses", "--dist", "no:xdist") or
                 a.startswith(("-n", "--numprocesses=", "--dist=")) for a in pytest_args)
    installed = importlib.util.find_spec("xdist") is not None
    if value == "auto":
        if chosen or impl != "reference" or provider != "process" or not installed:
            return 1
        return max(1, min(os.cpu_count() or 1, AUTO_WORKERS_MAX))
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"--workers {value!r}: expected 'auto' or a whole number >= 1")
    if count > 1 and not installed:
        raise ValueError(f"--workers {count}: pytest-xdist is not installed; install it "
                         "(pip install pytest-xdist) or pass --workers 1")
    if count > 1 and chosen:
        raise ValueError(f"--workers {count}: the pytest arguments already choose the "
                         "processes (-n/--dist/-p no:xdist); pass one or the other")
    return count


def _keep_order() -> list[str]:
    """The option that keeps pytest-xdist to the collection's order of files (from 3.7 it
    sorts them by their number of tests unless told not to; before, it kept the order)."""
    from importlib.metadata import version

    major, minor = (int(p) for p in version("pytest-xdist").split(".")[:2])
    return ["--no-loadscope-reorder"] if (major, minor) >= (3, 7) else []


def _load_report(command: str, path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise SystemExit(_error(command, f"cannot read report {path!r}: {exc}")) from None
    missing = [k for k in ("implementation", "version", "clauses") if not isinstance(data, dict)
               or k not in data]
    if missing:
        raise SystemExit(_error(
            command, f"{path!r} is not a conformance report (no {', '.join(missing)}); "
            "write one with: python -m conformance run --impl NAME --out DIR"))
    return data


def _write_html(command: str, path: str, reports: list[dict], title: str) -> None:
    from conformance import report

    try:
        with open(path, "w") as f:
            f.write(report.html(reports, title=title))
    except OSError as exc:
        raise SystemExit(_error(command, f"--html {path!r}: cannot write: {exc}")) from None
    print(f"wrote {path}", file=sys.stderr)


def _report(args) -> int:
    from conformance import report

    data = _load_report("report", args.file)
    sys.stdout.write(report.markdown(data))
    if args.html:
        _write_html("report", args.html, [data],
                    f"Conformance report: {data['implementation']} {data['version']}")
    return 0


def _compare(args) -> int:
    from conformance import report

    reports = [_load_report("compare", path) for path in args.files]
    sys.stdout.write(report.compare(reports))
    if args.html:
        _write_html("compare", args.html, reports, "Conformance matrix: " + " vs ".join(
            f"{r['implementation']} {r['version']}" for r in reports))
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


def _matrix(argv: list[str]) -> int:
    # imported only here: the matrix pulls in its fault kinds and jobs, which the other
    # subcommands never need
    try:
        from conformance.matrix import cli
    except ImportError as exc:
        return _error("matrix", f"the fault matrix is not available ({exc})")
    return cli.main(argv)


MATRIX_DESCRIPTION = """\
The fault-injection matrix: every fault kind x job x implementation, one verdict each.
Its options are those of `python -m conformance.matrix.cli`; this command passes every
argument after `matrix` to it unchanged (see `python -m conformance matrix --help`)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=_Help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    p = sub.add_parser(
        "run", help="run the suite against an implementation", formatter_class=_Help,
        description=_wrapped(
            "Run the conformance checks against one implementation in a fresh pytest "
            "process, print the per-clause report and write <impl>.json, <impl>.md "
            "and <impl>.html into --out. Progress (checks done / total, the running "
            "check, the time elapsed) goes to stderr. Arguments after `--` go to "
            "pytest, e.g. `-- -k surface -x`. Exits with pytest's status: 0 when "
            "every check passed or failed as its expectation file says."))
    p.add_argument("--impl", default=os.environ.get("TRAINSPEC_IMPL", "reference"),
                   help="implementation under test: 'reference', 'ray' or 'module:factory' "
                        "(a function returning a conformance Adapter) "
                        "(default: $TRAINSPEC_IMPL when set, else 'reference'; now: %(default)s)")
    p.add_argument("--out", default="reports", metavar="DIR", help="report folder")
    p.add_argument("--sim-provider", default=None, choices=["process", "netns", "docker"],
                   help="with --impl reference: run the multi-node checks' simcluster nodes "
                        "as processes, in network namespaces or in Docker containers "
                        "(default: $TRAINSPEC_SIM_PROVIDER when set, else 'process')")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="with --impl ray: run against this running Ray cluster (HOST:PORT, "
                        "or ray://HOST:10001) instead of a local Ray session; the suite "
                        "never stops it and removes what it created (default: "
                        "$TRAINSPEC_RAY_ADDRESS when set, else a local session)")
    p.add_argument("--allow-node-faults", action="store_true",
                   help="with --ray-address: run the checks that add, remove and kill nodes "
                        "on nodes the suite adds to that cluster itself (`ray start "
                        "--address` here), never on the cluster's own (default: off, they "
                        "skip)")
    p.add_argument("--workers", default="auto", metavar="N",
                   help="processes the checks are split over, a file's checks in one "
                        "(pytest-xdist; each process starts a cluster of its own): a number, "
                        "or 'auto': one per CPU (at most 4) with --impl reference on the "
                        "process provider where pytest-xdist is installed, else 1 "
                        "(default: auto)")
    p.add_argument("--progress", default="auto", choices=["auto", "live", "plain", "off"],
                   help="progress on stderr: 'live' (a rich display), 'plain' (one line per "
                        "check), 'auto' (live on a terminal, else plain) or 'off'")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS",
                   help="passed to pytest as they are (default: none)")
    p.set_defaults(fn=_run)

    p = sub.add_parser(
        "report", help="print a JSON report as Markdown", formatter_class=_Help,
        description=_wrapped(
            "Print a report written by `run` (<impl>.json) as a Markdown table, and "
            "with --html also as a self-contained HTML page."))
    p.add_argument("file", metavar="FILE.json", help="a report written by `run`")
    p.add_argument("--html", metavar="PATH", default=None,
                   help="also write the report as HTML to PATH (default: none, Markdown only)")
    p.set_defaults(fn=_report)

    p = sub.add_parser(
        "compare", help="compare reports side by side", formatter_class=_Help,
        description=_wrapped(
            "Print the clause x implementation table of several reports (e.g. "
            "reports/reference.json reports/ray.json) as Markdown, and with --html "
            "write it as a self-contained HTML matrix: one row per clause, one coloured "
            "column per implementation, the counts per implementation on top."))
    p.add_argument("files", nargs="+", metavar="FILE.json", help="reports written by `run`")
    p.add_argument("--html", metavar="PATH", default=None,
                   help="also write the matrix as HTML to PATH (default: none, Markdown only)")
    p.set_defaults(fn=_compare)

    p = sub.add_parser(
        "spec", help="write docs/spec from the catalogue", formatter_class=_Help,
        description=_wrapped(
            "Write the readable specification (one Markdown page per area, with the "
            "checks that cover each clause) from the clause catalogue, or with --check "
            "only say which pages are out of date (exit 1 if any)."))
    p.add_argument("--out", default=os.path.join("docs", "spec"), metavar="DIR",
                   help="folder of the spec pages")
    p.add_argument("--check", action="store_true", default=False,
                   help="write nothing; fail if the pages in --out are out of date")
    p.set_defaults(fn=_spec)

    sub.add_parser("matrix", help="run the fault-injection matrix", add_help=False,
                   description=MATRIX_DESCRIPTION, formatter_class=_Help)
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "matrix":
        return _matrix(argv[1:])
    args = build_parser().parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
