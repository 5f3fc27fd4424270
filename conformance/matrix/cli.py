"""The fault-injection matrix: every fault kind x job x implementation, one verdict each.

    python -m conformance matrix [--impl reference,ray] [--faults a,b] [--jobs x,y]
                                 [--job path/to/script.py ...] [--slice ci] [--json out.json]
                                 [--sim-provider process|netns|docker]

(also `python -m conformance.matrix.cli ...`, and `python ci/fault_matrix.py ...` in a
checkout). Prints one fault x job table per implementation (pass / fail / hang /
unsupported and seconds per cell), the one-line reason of every cell that did not pass, and
exits 1 if a cell failed or hung (unsupported is not a failure), 2 on a bad argument.
Progress (cells done / total, the cell running, time elapsed) goes to stderr: a live bar on
a terminal, one line per cell otherwise (`conformance.progress`).
`--job` runs the user's own training code as a job (repeatable or comma-separated; the
contract of a job file is in `conformance.matrix.job_file`); the job axis is then those
files, plus the built-in jobs named with --jobs. `--slice ci` is the bounded slice CI runs
(the reference only, the faults and jobs that fit in about a minute on two cores); an
explicit --impl, --faults, --jobs or --job replaces that axis of it. Implementations are
the conformance adapters (`reference`, `ray`, or `module:factory`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from conformance import adapters
from conformance.adapters.ray_adapter import ALLOW_NODE_FAULTS_ENV, RAY_ADDRESS_ENV
from conformance.adapters.reference_adapter import SIM_PROVIDER_ENV, check_sim_provider
from conformance.matrix.cells import JOBS, Job, job_of_file, run_cell
from conformance.matrix.faults import FAULTS
from conformance.matrix.job_file import load_job
from conformance.matrix.table import CellResult, exit_code, one_line, render, to_json

PROG = "python -m conformance matrix"
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
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--impl", help=f"implementations (default: {','.join(DEFAULT_IMPLS)})")
    p.add_argument("--faults", help=f"fault kinds (default: all of {','.join(FAULTS)})")
    p.add_argument("--jobs", help=f"built-in jobs (default: all of {','.join(JOBS)})")
    p.add_argument("--job", action="append", default=[], metavar="PATH.py",
                   help="a job file: your train_func(config) (repeatable, or comma-separated)")
    p.add_argument("--slice", choices=sorted(SLICES), help="a named bounded slice")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="Ray's cells run against this running Ray cluster (its node-fault "
                        "cells are unsupported there unless --allow-node-faults) (default: "
                        "$TRAINSPEC_RAY_ADDRESS, else a local Ray session)")
    p.add_argument("--allow-node-faults", action="store_true",
                   help="with --ray-address: the node-fault cells run on nodes the matrix "
                        "adds to that cluster itself, never on the cluster's own")
    p.add_argument("--sim-provider", choices=["process", "netns", "docker"],
                   help="where the reference's simcluster nodes run: processes, network "
                        "namespaces or Docker containers (default: $TRAINSPEC_SIM_PROVIDER "
                        "or 'process')")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p


def job_files(values: list[str]) -> dict[str, Job]:
    """The `--job` files as jobs, by name (the file name; the path where two share one)."""
    paths = list(dict.fromkeys(p.strip() for v in values for p in v.split(",") if p.strip()))
    loaded = [load_job(p) for p in paths]
    names = [j.name for j in loaded]
    out: dict[str, Job] = {}
    for path, job in zip(paths, loaded, strict=True):
        name = job.name if names.count(job.name) == 1 and job.name not in JOBS else path
        out[name] = job_of_file(job, name)
    return out


def selection(args) -> tuple[list[str], list[str], list[Job]]:
    """(implementations, fault kinds, jobs) the arguments ask for; ValueError names a bad
    one and what is allowed."""
    chosen = SLICES.get(args.slice, {})
    impls = parse_names("impl", args.impl, adapters.BUILTIN, open_ended=True) if args.impl \
        else list(chosen.get("impl", DEFAULT_IMPLS))
    faults = parse_names("faults", args.faults, FAULTS) if args.faults \
        else list(chosen.get("faults", FAULTS))
    files = job_files(args.job)
    if args.jobs:
        builtin = parse_names("jobs", args.jobs, JOBS)
    else:
        builtin = [] if files else list(chosen.get("jobs", JOBS))
    return impls, faults, [JOBS[name] for name in builtin] + list(files.values())


class PlainLines:
    """One `[n/total] impl fault x job: verdict` line per finished cell on stderr: the
    progress display where `conformance.progress` is missing."""

    def __init__(self, total: int, title: str = "", *, stream=None):
        self.total, self.completed, self.stream = total, 0, stream or sys.stderr

    def start(self, name: str) -> None:
        pass

    def done(self, name: str, outcome: str) -> None:
        self.completed += 1
        print(f"[{self.completed}/{self.total}] {name}: {outcome}", file=self.stream, flush=True)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_display(total: int, title: str = "fault matrix"):
    """`conformance.progress.Progress` (a live bar on a terminal, plain lines otherwise)
    when it is there, else `PlainLines`."""
    try:
        from conformance.progress import Progress
    except ImportError:
        return PlainLines(total, title)
    return Progress(total, title)


def _label(impl: str, fault: str, job: str) -> str:
    return f"{impl} {fault} x {job}"


def _outcome(r: CellResult) -> str:
    # the verdict alone, so that the progress summary counts verdicts; the reasons are in
    # the table's "not passed" lines
    return r.verdict


def run_matrix(impls, faults, jobs: list[Job], progress=None) -> tuple[list[CellResult], dict]:
    """Every cell, implementation by implementation (set up once, torn down after);
    `progress` (start(name), done(name, outcome)) hears of each cell."""
    results: list[CellResult] = []
    versions: dict = {}
    progress = progress or PlainLines(len(impls) * len(faults) * len(jobs))
    for name in impls:
        try:
            impl = adapters.load(name)
            impl.setup()
        except Exception as exc:  # noqa: BLE001 - each of its cells fails with the reason
            reason = one_line(f"setup of {name!r} raised {type(exc).__name__}: {exc}")
            for fault in faults:
                for job in jobs:
                    results.append(CellResult(name, fault, job.name, "fail", 0.0, reason,
                                              str(exc)))
                    progress.done(_label(name, fault, job.name), _outcome(results[-1]))
            continue
        provider, address = getattr(impl, "provider", None), getattr(impl, "address", None)
        versions[impl.name] = impl.version() + (
            f", simcluster nodes: {provider}" if provider else "") + (
            f", Ray cluster at {address}" if address else "")
        try:
            for fault in faults:
                for job in jobs:
                    label = _label(impl.name, fault, job.name)
                    progress.start(label)
                    results.append(run_cell(impl, FAULTS[fault], job))
                    progress.done(label, _outcome(results[-1]))
        finally:
            impl.teardown()
    return results, versions


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        impls, faults, jobs = selection(args)
        if args.sim_provider:
            os.environ[SIM_PROVIDER_ENV] = check_sim_provider(args.sim_provider)
        if args.allow_node_faults:
            adapters.check_cluster_options("ray", None, args.ray_address, True)
        if args.ray_address:
            os.environ[RAY_ADDRESS_ENV] = args.ray_address
        if args.allow_node_faults:
            os.environ[ALLOW_NODE_FAULTS_ENV] = "1"
    except ValueError as exc:
        parser.error(str(exc))
    start = time.monotonic()
    with progress_display(len(impls) * len(faults) * len(jobs)) as progress:
        results, versions = run_matrix(impls, faults, jobs, progress)
    elapsed = time.monotonic() - start
    sys.stdout.write(render(results, versions))
    print(f"wall time: {elapsed:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(results, versions=versions, wall_s=round(elapsed, 2),
                              impls=impls, faults=faults, jobs=[j.name for j in jobs]), f,
                      indent=2)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
