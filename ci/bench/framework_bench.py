"""What the framework overhead benchmarks share (`lightning_overhead.py`,
`transformers_overhead.py`): the command line, the launches of each side, the rounds and
the printed tables. Not a benchmark itself.

A script built on it defines `train_fn(config)`, the training function every side runs
(under torchrun as `--child plain`, or inside a TorchTrainer), in the script itself, so both
implementations ship it to their workers by value. Rank 0 writes what it measured to
`config["result"]` as JSON. Three sides:

  plain:     torchrun --standalone --nproc-per-node=W <script> --child plain (the framework
             sets up torch.distributed from torchrun's variables, as it does for any user);
  reference: `reference.train.torch.TorchTrainer` on a one-node simcluster whose node
             supervisors preloaded torch and the framework (`warm_reference`), in this
             process, for all rounds;
  ray:       Ray 2.60's `ray.train.torch.TorchTrainer` in a process of its own per fit
             (`ray.init(address="local", num_cpus=W)`, `ray.shutdown()` before it exits).

A fit started in a fresh process (`run_child`) is also how the start-up of a first fit is
measured, for Ray and for the reference alike. Every launch has a deadline; its whole
process tree is killed when it passes, and processes a launch leaves behind are killed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _path in (str(HERE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import proctree  # noqa: E402

from simcluster import procfs  # noqa: E402

SIDES = ("plain", "reference", "ray")
SIDE_NAMES = {"plain": "plain", "reference": "reference", "ray": "Ray"}
RAY_ENV = {
    # Ray Train drains reports once per controller poll; Ray's own tests lower the interval.
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1",
    "RAY_DEDUP_LOGS": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}
# What the node supervisors of the reference's warm cluster import besides the framework.
TORCH_PRELOAD = ("torch", "torch.distributed", "torch.distributed._functional_collectives",
                 "reference.train.torch")


class LaunchError(RuntimeError):
    pass


# ------------------------------------------------------------------------------ set-up
def setup_environment() -> None:
    """Children (torchrun's processes, Ray's workers) import this tree's packages and this
    module (training functions refer to it), nothing
    is downloaded, and processes a launch orphans re-parent to this one, where they are
    found and killed."""
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(ROOT)] + [p for p in path if p not in (str(HERE), str(ROOT))])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # DDP's one-line warnings
    proctree.become_subreaper()


def parse_args(doc: str, *, steps: int, warmup: int, quick: dict,
               extra=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=steps, help="timed steps per fit")
    parser.add_argument("--warmup", type=int, default=warmup,
                        help="untimed steps before the timed ones")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES),
                        help="comma-separated, of " + ",".join(SIDES))
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one launch may take before its processes are killed")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: few steps, one round (explicit options win)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="run only this variant (repeatable; default: every one)")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    if args.quick:
        given = {a.split("=")[0] for a in sys.argv[1:] if a.startswith("--")}
        for name, value in {"rounds": 1, "timeout": 240.0, **quick}.items():
            if f"--{name.replace('_', '-')}" not in given:
                setattr(args, name, value)
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        parser.error(f"--sides: unknown {unknown}; choose from {','.join(SIDES)}")
    args.sides = [s for s in SIDES if s in sides]
    args.threads = max(1, (os.cpu_count() or 1) // args.workers)
    return args


def ray_importable(timeout: float = 120.0) -> str | None:
    """None when `import ray` works in a fresh interpreter, else why not."""
    try:
        done = subprocess.run([sys.executable, "-c", "import ray, ray.train.torch"],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"import ray took more than {timeout:.0f} s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


# ------------------------------------------------------------------------------ launches
def run_command(cmd: list[str], timeout: float) -> tuple[int | None, float, str]:
    """Run cmd in a session of its own; on the deadline SIGTERM its group, then SIGKILL its
    tree. Whatever it left running afterwards is killed too. Returns (exit status or None
    on timeout, wall seconds, the tail of its output)."""
    before = _children()
    with tempfile.TemporaryFile("w+b") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)  # lets a child's `finally` shut Ray down
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proctree.kill_tree(proc.pid)
                proc.wait(30)
        finally:
            if proc.poll() is None:
                proctree.kill_tree(proc.pid)
                proc.wait(30)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
    _kill_leftovers(before)
    return rc, wall, text[-6000:]


def _children() -> set[int]:
    me = os.getpid()
    return {pid for pid, parent in procfs.parents().items() if parent == me}


def _kill_leftovers(before: set[int]) -> None:
    """Kill what a finished launch left: processes that re-parented to this one (a
    subreaper) since `before` was taken, with their descendants, and reap them. Processes
    this one started itself before (a cluster's supervisors) are left alone."""
    killed: set[int] = set()
    for root in _children() - before:
        killed.update([root, *proctree.descendants(root)])
        proctree.kill_tree(root)
    deadline = time.monotonic() + 5.0
    while killed and time.monotonic() < deadline:
        for pid in list(killed):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    killed.discard(pid)
            except ChildProcessError:  # not (or no longer) a child of this process
                if not os.path.exists(f"/proc/{pid}"):
                    killed.discard(pid)
        if killed:
            time.sleep(0.05)


def _checked(rc: int | None, text: str, timeout: float, what: str) -> None:
    if rc is None:
        raise LaunchError(f"{what}: timed out after {timeout:.0f} s\n{text[-2000:]}")
    if rc != 0:
        raise LaunchError(f"{what}: exit status {rc}\n{text[-3000:]}")


def read_json(path: str):
    with open(path) as f:
        return json.load(f)


def write_json(path: str, obj) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def run_plain(script: str, config: dict, args) -> dict:
    """One torchrun launch of `script --child plain`; rank 0's measurements plus `wall`
    (the whole launch: interpreter start, imports, rendezvous, the fit, shutdown)."""
    with tempfile.TemporaryDirectory() as scratch:
        config = {**config, "impl": "plain", "result": os.path.join(scratch, "result.json"),
                  "scratch": scratch}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={args.workers}", script, "--child", "plain",
               "--config", json.dumps(config)]
        rc, wall, text = run_command(cmd, args.timeout)
        _checked(rc, text, args.timeout, "torchrun")
        try:
            out = read_json(config["result"])
        except (OSError, ValueError) as exc:
            raise LaunchError(f"torchrun wrote no result ({exc})\n{text[-2000:]}") from exc
    return {**out, "wall": wall}


def run_child(script: str, impl: str, jobs: list[dict], args) -> dict:
    """A fresh process that initializes `impl` (`ray.init(address="local", num_cpus=W)` or
    `reference.init(num_cpus=W)`), runs one fit per job in order and shuts down:
    {"init_s": ..., "fits": [fit(...) per job]}."""
    with tempfile.TemporaryDirectory() as scratch:
        result = os.path.join(scratch, "child.json")
        cmd = [sys.executable, script, "--child", impl, "--workers", str(args.workers),
               "--config", json.dumps(jobs), "--result", result]
        rc, wall, text = run_command(cmd, args.timeout)
        _checked(rc, text, args.timeout, f"{impl} child")
        try:
            out = read_json(result)
        except (OSError, ValueError) as exc:
            raise LaunchError(f"{impl} child wrote no result ({exc})\n{text[-2000:]}") from exc
    if "error" in out:
        raise LaunchError(f"{impl} child: {out['error']}")
    return {**out, "wall": wall}


def fit(impl: str, train_fn, config: dict, storage: str, workers: int) -> dict:
    """One TorchTrainer fit of `train_fn` with `workers` workers. Rank 0's measurements plus
    `fit_called` / `fit_returned` (time.time() around `fit()`) and `wall`."""
    train = importlib.import_module(f"{impl}.train")
    train_torch = importlib.import_module(f"{impl}.train.torch")
    with tempfile.TemporaryDirectory() as scratch:
        config = {**config, "impl": impl, "result": os.path.join(scratch, "result.json"),
                  "scratch": scratch}
        trainer = train_torch.TorchTrainer(
            train_fn, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=workers),
            run_config=train.RunConfig(storage_path=storage,
                                       name=f"{config.get('job', 'fit')}-{time.time_ns()}"))
        called = time.time()
        trainer.fit()
        returned = time.time()
        out = read_json(config["result"])
    return {**out, "fit_called": called, "fit_returned": returned, "wall": returned - called}


def child_main(args, train_fn) -> None:
    """The `--child` entry point: under torchrun (plain), run the training function; else
    initialize Ray or the reference, run the given fits, shut down, write the results."""
    if args.child == "plain":
        train_fn(json.loads(args.config))
        # The work is done and rank 0 has written its result. With torch 2.13 a process
        # that has run the Trainer under torchrun can abort while the interpreter shuts
        # down ("terminate called without an active exception", SIGABRT with no Python
        # frame: a C++ thread still joinable at exit), about one launch in 30 on a loaded
        # machine, which fails the launch after its work. So leave the process group,
        # flush and leave without the interpreter's finalization.
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    jobs = json.loads(args.config)
    out: dict = {"fits": []}
    if args.child == "ray":
        os.environ.update(RAY_ENV)
    try:
        with tempfile.TemporaryDirectory() as storage:
            start = time.perf_counter()
            if args.child == "ray":
                import ray

                # "local": a Ray instance of its own, even where another runs on the machine.
                ray.init(address="local", num_cpus=args.workers, include_dashboard=False,
                         log_to_driver=False, logging_level="ERROR")
            else:
                import reference

                reference.init(num_cpus=args.workers)
            out["init_s"] = time.perf_counter() - start
            try:
                for job in jobs:
                    out["fits"].append(fit(args.child, train_fn, job, storage, args.workers))
            finally:
                if args.child == "ray":
                    import ray

                    ray.shutdown()
                else:
                    import reference

                    reference.shutdown()
    except BaseException as exc:  # noqa: BLE001 - carried to the parent as data
        import traceback

        out["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"
    write_json(args.result, out)


@contextlib.contextmanager
def warm_reference(workers: int, modules: tuple[str, ...]):
    """A one-node simcluster whose supervisors imported torch and `modules` once (workers
    fork with them loaded, as from a warm pool), with `reference.init` connected to it."""
    import reference
    import simcluster

    preload = (*reference.PRELOAD, *TORCH_PRELOAD, *modules)
    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=workers)],
                            preload=preload) as cluster:
        reference.init(address=cluster.address)
        try:
            yield cluster
        finally:
            reference.shutdown()


@contextlib.contextmanager
def sides_context(args, sides: list[str], modules: tuple[str, ...]):
    """A storage folder for the reference's fits, and its warm cluster when the reference
    is one of the sides."""
    with tempfile.TemporaryDirectory() as storage:
        if "reference" in sides:
            with warm_reference(args.workers, modules):
                yield storage
        else:
            yield storage


def alternate(items: list, round_: int) -> list:
    """Even rounds in the given order, odd rounds reversed: a drift in machine load hits
    every side alike."""
    return list(items) if round_ % 2 == 0 else list(items)[::-1]


def attempt(errors: list[str], what: str, launch):
    """launch(), or None with the error noted (the other sides carry on)."""
    try:
        return launch()
    except Exception as exc:  # noqa: BLE001 - one failed launch does not end the benchmark
        errors.append(f"{what}: {exc}")
        print(f"  {what} failed: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
        return None


# ------------------------------------------------------------------------------ rounds
@dataclass
class Plan:
    """What a benchmark runs: `timed` fits, once per variant (its settings on top of
    `timed`) and side, and a `startup` fit (None: none) for the reference and Ray."""

    script: str
    train_fn: Callable
    timed: dict
    variants: dict[str, dict]
    startup: dict | None
    preload: tuple[str, ...]


@dataclass
class Outcome:
    sides: list[str]
    results: dict[str, dict[str, list]]  # variant -> side -> [launch result or None]
    starts: dict[str, list]  # startup row -> [fit result or None]
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0


def run_rounds(plan: Plan, args) -> Outcome:
    """`args.rounds` rounds; in each, every variant in turn, and for each variant every
    side in turn, so the sides of a variant run within a minute or two of each other; then
    the start-up rows. Every order is reversed every other round."""
    unknown = sorted(set(args.variant) - set(plan.variants))
    if unknown:
        sys.exit(f"--variant: unknown {unknown}; choose from {sorted(plan.variants)}")
    setup_environment()
    sides = list(args.sides)
    out = Outcome(sides, {}, {})
    if "ray" in sides:
        why = ray_importable()
        if why is not None:
            sides.remove("ray")
            out.notes.append(f"Ray skipped: {why}")
    # A variant marked "full_only" (a diagnosis, not the figure) is left out with --quick.
    variants = {name: {k: v for k, v in settings.items() if k != "full_only"}
                for name, settings in plan.variants.items()
                if not (args.quick and settings.get("full_only"))
                and (not args.variant or name in args.variant)}
    out.results = {name: {s: [] for s in sides} for name in variants}
    startup = None if plan.startup is None else {**plan.startup, "job": "startup"}
    if startup is not None:
        if "reference" in sides:
            out.starts["reference, warm cluster"] = []
            out.starts["reference, fresh process"] = []
        if "ray" in sides:
            out.starts["Ray, fresh process"] = []

    def timed(name: str) -> dict:
        return {**plan.timed, **variants[name], "job": "timed"}

    def timed_launch(side: str, name: str, storage: str) -> dict:
        if side == "plain":
            return run_plain(plan.script, timed(name), args)
        if side == "reference":
            return fit("reference", plan.train_fn, timed(name), storage, args.workers)
        return run_child(plan.script, "ray", [timed(name)], args)["fits"][0]

    def startup_launch(row: str, storage: str) -> dict:
        if row == "reference, warm cluster":
            return fit("reference", plan.train_fn, startup, storage, args.workers)
        child = run_child(plan.script, "reference" if row.startswith("reference") else "ray",
                          [startup], args)
        return {**child["fits"][0], "init_s": child["init_s"]}

    start = time.perf_counter()
    with sides_context(args, sides, plan.preload) as storage:
        for round_ in range(args.rounds):
            print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr, flush=True)
            for name in alternate(variants, round_):
                for side in alternate(sides, round_):
                    out.results[name][side].append(attempt(
                        out.errors, f"{side} {name}",
                        lambda s=side, n=name: timed_launch(s, n, storage)))
            for row in alternate(out.starts, round_):
                out.starts[row].append(attempt(
                    out.errors, f"start-up, {row}", lambda r=row: startup_launch(r, storage)))
    out.elapsed = time.perf_counter() - start
    return out


def report(out: Outcome, args, header: str, target: float, startup_title: str) -> None:
    """Print the tables; exit with status 1 when a launch failed."""
    header += (f"{args.rounds} alternating round(s); best (median); load average at the end "
               f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; {out.elapsed:.0f} s in all")
    rows = list(out.results.items())
    sections = [("throughput (steps/s on rank 0; overhead against plain)",
                 throughput_table(rows, out.sides)),
                ("", target_lines(rows, out.sides, target) + thread_lines(rows, out.sides)),
                ("CPU time per timed step on rank 0 (process CPU time / steps, ms; other load "
                 "on the machine moves it less than steps/s)", cpu_table(rows, out.sides))]
    if out.starts:
        sections.append((startup_title, startup_table(list(out.starts.items()))))
    print_report(header, sections, out.notes, out.errors)
    if out.errors:
        sys.exit(1)


# ------------------------------------------------------------------------------ tables
def best_median(samples: list[float], higher_is_better: bool) -> tuple[float, float] | None:
    # On a shared machine other load only ever slows a round down, so the best round is the
    # closest estimate of each side's own speed; the median shows the spread.
    if not samples:
        return None
    best = max(samples) if higher_is_better else min(samples)
    return best, statistics.median(samples)


def fmt_pair(pair: tuple[float, float] | None, digits: int = 1, width: int = 0) -> str:
    if pair is None:
        return "n/a".rjust(width)
    return f"{pair[0]:.{digits}f} ({pair[1]:.{digits}f})".rjust(width)


def overhead(plain: tuple[float, float] | None, other: tuple[float, float] | None):
    """(best, median) overhead of `other` against `plain` in steps/s: (p - o) / p."""
    if plain is None or other is None:
        return None
    return tuple((p - o) / p for p, o in zip(plain, other, strict=True))


def fmt_overhead(pair, width: int = 0) -> str:
    if pair is None:
        return "n/a".rjust(width)
    return f"{pair[0]:.1%} ({pair[1]:.1%})".rjust(width)


def throughput_table(rows: list[tuple[str, dict[str, list[dict]]]], sides: list[str],
                     label: str = "variant") -> list[str]:
    """rows: (variant, {side: [launch results with "rate" and "wall"]}). One line per
    variant: each side's steps/s as best (median), each other side's overhead against
    plain, and the median wall time of each side's launches."""
    width = max([len(label)] + [len(v) for v, _ in rows]) + 2
    head = f"{label:<{width}}"
    for side in sides:
        head += f"{SIDE_NAMES[side] + ' steps/s':>20}"
        if side != "plain" and "plain" in sides:
            head += f"{'overhead':>18}"
    head += f"{'wall s ' + '/'.join(SIDE_NAMES[s] for s in sides):>34}"
    lines = [head]
    for variant, by_side in rows:
        rates = {s: best_median([r["rate"] for r in by_side.get(s, []) if r], True)
                 for s in sides}
        line = f"{variant:<{width}}"
        for side in sides:
            line += fmt_pair(rates[side], width=20)
            if side != "plain" and "plain" in sides:
                line += fmt_overhead(overhead(rates["plain"], rates[side]), width=18)
        walls = []
        for side in sides:
            samples = [r["wall"] for r in by_side.get(side, []) if r]
            walls.append(f"{statistics.median(samples):.2f}" if samples else "n/a")
        line += f"{' / '.join(walls):>34}"
        lines.append(line)
    return lines


def cpu_table(rows: list[tuple[str, dict[str, list[dict]]]], sides: list[str],
              label: str = "variant") -> list[str]:
    """rows as for `throughput_table`, whose results also hold "cpu_per_step" (rank 0's
    process CPU time over the timed steps / steps). One line per variant: each side's CPU
    ms per step as best (median), each other side's extra CPU against plain."""
    width = max([len(label)] + [len(v) for v, _ in rows]) + 2
    head = f"{label:<{width}}"
    for side in sides:
        head += f"{SIDE_NAMES[side] + ' CPU ms/step':>24}"
        if side != "plain" and "plain" in sides:
            head += f"{'extra':>18}"
    lines = [head]
    for variant, by_side in rows:
        cpu = {s: best_median([r["cpu_per_step"] * 1e3 for r in by_side.get(s, [])
                               if r and r.get("cpu_per_step")], False) for s in sides}
        line = f"{variant:<{width}}"
        for side in sides:
            line += fmt_pair(cpu[side], 2, 24)
            if side != "plain" and "plain" in sides:
                extra = overhead(cpu["plain"], cpu[side])
                line += fmt_overhead(None if extra is None else tuple(-x for x in extra), 18)
        lines.append(line)
    return lines


def target_lines(rows, sides: list[str], target: float) -> list[str]:
    """Whether the reference's overhead against plain is within `target`: met when it is
    on the best rounds and in the medians, not met when it is in neither."""
    if "plain" not in sides or "reference" not in sides:
        return []
    out = []
    for variant, by_side in rows:
        plain = best_median([r["rate"] for r in by_side.get("plain", []) if r], True)
        ours = best_median([r["rate"] for r in by_side.get("reference", []) if r], True)
        pair = overhead(plain, ours)
        if pair is None:
            out.append(f"{variant}: reference vs plain: n/a (target <= {target:.0%})")
            continue
        within = [p <= target for p in pair]
        verdict = ("met" if all(within) else "NOT met" if not any(within)
                   else "undecided (best and median disagree)")
        out.append(f"{variant}: reference vs plain {pair[0]:.2%} best, {pair[1]:.2%} median "
                   f"(target <= {target:.0%}): {verdict}")
    return out


def startup_table(rows: list[tuple[str, list[dict]]]) -> list[str]:
    """rows: (label, [fit results with fit_called, fn_start, first_step, wall, init_s]).
    Seconds as best (median): init, fit() -> train fn on rank 0, fit() -> rank 0's first
    training step, the whole fit()."""
    width = max(len(label) for label, _ in rows) + 2
    lines = [f"{'':<{width}}{'init s':>16}{'fit->fn start s':>18}{'fit->1st step s':>18}"
             f"{'fit total s':>16}"]
    for label, fits in rows:
        fits = [f for f in fits if f]

        def col(key, fits=fits):
            samples = [f[key] for f in fits if f.get(key) is not None]
            return best_median(samples, higher_is_better=False)

        for f in fits:
            f["to_fn"] = f["fn_start"] - f["fit_called"]
            f["to_step"] = f["first_step"] - f["fit_called"]
        lines.append(f"{label:<{width}}{fmt_pair(col('init_s'), 2, 16)}"
                     f"{fmt_pair(col('to_fn'), 2, 18)}{fmt_pair(col('to_step'), 2, 18)}"
                     f"{fmt_pair(col('wall'), 2, 16)}")
    return lines


def thread_lines(rows, sides: list[str]) -> list[str]:
    """The torch threads (and OMP_NUM_THREADS) each side's processes had when training
    started, before the benchmark set them: the launchers' defaults differ."""
    seen = {}
    for _, by_side in rows:
        for side in sides:
            for r in by_side.get(side, []):
                if r and "launched_threads" in r:
                    seen.setdefault(side, set()).add((r["launched_threads"], r.get("omp")))
    if not seen:
        return []
    parts = [f"{SIDE_NAMES[s]} " + ", ".join(f"{t} (OMP_NUM_THREADS={o or 'unset'})"
                                               for t, o in sorted(seen[s], key=str))
             for s in sides if s in seen]
    return ["torch threads per process at the start of training, as launched: "
            + "; ".join(parts)]


def print_report(header: str, sections: list[tuple[str, list[str]]], notes: list[str],
                 errors: list[str]) -> None:
    print(header)
    for title, lines in sections:
        print()
        if title:
            print(title)
        for line in lines:
            print(line)
    for note in notes:
        print(f"note: {note}")
    if errors:
        print(f"{len(errors)} launch(es) failed:")
        for error in errors:
            print("  " + error.replace("\n", "\n    "))
    sys.stdout.flush()
