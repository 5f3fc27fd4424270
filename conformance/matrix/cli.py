"""The fault-injection matrix: every fault kind x job x implementation, one verdict each.

    python ci/fault_matrix.py [--impl reference,ray] [--faults a,b] [--jobs x,y]
                              [--slice ci] [--json out.json]

Prints one fault x job table per implementation (pass / fail / hang / unsupported and
seconds per cell), the one-line reason of every cell that did not pass, and exits 1 if a
cell failed or hung (unsupported is not a failure), 2 on a bad argument. `--slice ci` is
the bounded slice CI runs (the reference only, the faults and jobs that fit in about three
minutes on two cores); an explicit --impl, --faults or --jobs replaces that axis of it.
Implementations are the conformance adapters (`reference`, `ray`, or `module:factory`).

Fault kinds and jobs live in `_matrix_faults` and `_matrix_cells`; verdicts and the table
in `_matrix_table`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the helpers sit next to this script (ci/ is no package)
    sys.path.insert(0, _HERE)

from _matrix_cells import JOBS, run_cell  # noqa: E402
from _matrix_faults import FAULTS  # noqa: E402
from _matrix_table import CellResult, exit_code, one_line, render, to_json  # noqa: E402

from conformance import adapters  # noqa: E402

SLICES = {
    "ci": {
        "impl": ("reference",),
        "faults": ("worker-raise", "worker-sigkill", "node-loss", "node-pause", "elastic-grow"),
        "jobs": ("noop", "resume"),
    },
}
DEFAULT_IMPLS = ("reference", "ray")


def parse_names(option: str, value: str, allowed, *, open_ended: bool = False) -> list[str]:
    """The comma-separated names of `--option=value`, each one of `allowed` (or, where
    `open_ended`, a `module:factory` spec)."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in allowed and not (open_ended and ":" in n)]
    if not names or unknown:
        extra = " or 'module:factory'" if open_ended else ""
        raise ValueError(f"--{option}={value!r}: unknown {unknown or 'empty list'}; expected a "
                         f"comma-separated list of {sorted(allowed)}{extra}")
    return list(dict.fromkeys(names))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ci/fault_matrix.py", description=__doc__.split("\n")[0])
    p.add_argument("--impl", help=f"implementations (default: {','.join(DEFAULT_IMPLS)})")
    p.add_argument("--faults", help=f"fault kinds (default: all of {','.join(FAULTS)})")
    p.add_argument("--jobs", help=f"jobs (default: all of {','.join(JOBS)})")
    p.add_argument("--slice", choices=sorted(SLICES), help="a named bounded slice")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p


def selection(args) -> tuple[list[str], list[str], list[str]]:
    chosen = SLICES.get(args.slice, {})
    impls = parse_names("impl", args.impl, adapters.BUILTIN, open_ended=True) if args.impl \
        else list(chosen.get("impl", DEFAULT_IMPLS))
    faults = parse_names("faults", args.faults, FAULTS) if args.faults \
        else list(chosen.get("faults", FAULTS))
    jobs = parse_names("jobs", args.jobs, JOBS) if args.jobs else list(chosen.get("jobs", JOBS))
    return impls, faults, jobs


def _progress(n: int, total: int, r: CellResult) -> None:
    tail = f": {r.reason}" if r.reason else ""
    print(f"[{n}/{total}] {r.impl} {r.fault} x {r.job}: {r.verdict} ({r.seconds:.1f} s){tail}",
          file=sys.stderr, flush=True)


def run_matrix(impls, faults, jobs, progress=_progress) -> tuple[list[CellResult], dict]:
    """Every cell, implementation by implementation (set up once, torn down after)."""
    results: list[CellResult] = []
    versions: dict = {}
    total = len(impls) * len(faults) * len(jobs)
    for name in impls:
        try:
            impl = adapters.load(name)
            impl.setup()
        except Exception as exc:  # noqa: BLE001 - each of its cells fails with the reason
            reason = one_line(f"setup of {name!r} raised {type(exc).__name__}: {exc}")
            for fault in faults:
                for job in jobs:
                    results.append(CellResult(name, fault, job, "fail", 0.0, reason, str(exc)))
                    progress(len(results), total, results[-1])
            continue
        versions[impl.name] = impl.version()
        try:
            for fault in faults:
                for job in jobs:
                    results.append(run_cell(impl, FAULTS[fault], JOBS[job]))
                    progress(len(results), total, results[-1])
        finally:
            impl.teardown()
    return results, versions


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        impls, faults, jobs = selection(args)
    except ValueError as exc:
        parser.error(str(exc))
    start = time.monotonic()
    results, versions = run_matrix(impls, faults, jobs)
    elapsed = time.monotonic() - start
    sys.stdout.write(render(results, versions))
    print(f"wall time: {elapsed:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(results, versions=versions, wall_s=round(elapsed, 2),
                              impls=impls, faults=faults, jobs=jobs), f, indent=2)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
