"""One benchmark job against one implementation, in a process of its own.

    python ci/bench/bench_child.py --job N --impl reference|ray --params JSON --result FILE

Writes {"metrics": {key: [samples]}, "notes": {...}} or {"error": ..., "traceback": ...} to
FILE. `bench.py` starts this script once per job, implementation and round, so Ray and the
reference never share a process. Training functions are defined in this script (`__main__`),
so both implementations ship them to their workers by value. Only public APIs are used:
`ray.train` / `reference.train`, `ray.init` / `reference.init`, and `simcluster.Cluster`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback

RAY_ENV = {
    # Ray Train drains reports once per controller poll; Ray's own tests lower the interval.
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1",
    "RAY_DEDUP_LOGS": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}
NUM_CPUS = 4


# --------------------------------------------------------------------- implementation access
def train_module(impl: str):
    if impl == "ray":
        import ray.train

        return ray.train
    import reference.train

    return reference.train


def trainer_class(impl: str, kind: str = "data_parallel"):
    """The no-op jobs' trainer. "torch": TorchTrainer (gloo process group per attempt),
    imported only when asked for, i.e. after init(), as a script that calls init() first
    meets it."""
    if kind == "torch":
        if impl == "ray":
            from ray.train.torch import TorchTrainer
        else:
            from reference.train.torch import TorchTrainer
        return TorchTrainer
    if impl == "ray":
        from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

        return DataParallelTrainer
    from reference.train import DataParallelTrainer

    return DataParallelTrainer


def init(impl: str, address: str | None = None) -> None:
    if impl == "ray":
        import ray

        ray.init(address="local", num_cpus=NUM_CPUS, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    else:
        import reference

        if address is None:
            reference.init(num_cpus=NUM_CPUS)
        else:
            reference.init(address=address)


def shutdown(impl: str) -> None:
    if impl == "ray":
        import ray

        ray.shutdown()
    else:
        import reference

        reference.shutdown()


def make_trainer(impl: str, fn, storage: str, name: str, workers: int = 2,
                 config: dict | None = None, max_failures: int = 0,
                 kind: str = "data_parallel"):
    t = train_module(impl)
    return trainer_class(impl, kind)(
        fn,
        train_loop_config=config,
        scaling_config=t.ScalingConfig(num_workers=workers),
        run_config=t.RunConfig(storage_path=storage, name=name,
                               failure_config=t.FailureConfig(max_failures=max_failures)),
    )


def write_json(path: str, obj) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def read_json(path: str):
    with open(path) as f:
        return json.load(f)


# --------------------------------------------------------------------- training functions
def noop_loop():
    pass


def report_loop(config):
    import time as _time

    t = train_module(config["impl"])
    rank = t.get_context().get_world_rank()
    t.report({"i": -1})  # warm-up, not timed
    times = []
    for i in range(config["k"]):
        start = _time.perf_counter()
        t.report({"i": i})
        times.append(_time.perf_counter() - start)
    write_json(os.path.join(config["dir"], f"times_{rank}.json"), times)


def recovery_loop(config):
    import os as _os
    import signal as _signal
    import time as _time

    t = train_module(config["impl"])
    rank = t.get_context().get_world_rank()
    d = config["dir"]
    try:  # the marker says whether this rank already ran once (attempt 0) or not
        _os.close(_os.open(_os.path.join(d, f"started_{rank}"), _os.O_CREAT | _os.O_EXCL))
        attempt = 0
    except FileExistsError:
        attempt = 1
    if attempt == 1:
        write_json(_os.path.join(d, f"restart_{rank}.json"), _time.time())
    for step in range(3 if attempt == 0 else 1):
        if attempt == 0 and rank == 1 and step == 1:
            write_json(_os.path.join(d, "kill.json"), _time.time())
            _os.kill(_os.getpid(), _signal.SIGKILL)
        ckpt = _os.path.join(d, f"ckpt_a{attempt}_r{rank}_s{step}")
        _os.makedirs(ckpt, exist_ok=True)
        with open(_os.path.join(ckpt, f"state_{rank}.json"), "w") as f:
            f.write(str(step))
        t.report({"step": step, "attempt": attempt},
                 checkpoint=t.Checkpoint.from_directory(ckpt))


def checkpoint_loop(config):
    import time as _time

    t = train_module(config["impl"])
    rank = t.get_context().get_world_rank()
    local = config["local"][rank]
    out = {}
    for variant, delete in (("copy", False), ("move", True)):
        t.report({"phase": f"barrier-{variant}"})  # every rank starts the timed report together
        start = _time.perf_counter()
        t.report({"phase": variant}, checkpoint=t.Checkpoint.from_directory(local),
                 delete_local_checkpoint_after_upload=delete)
        out[variant] = _time.perf_counter() - start
    write_json(os.path.join(config["dir"], f"ckpt_{rank}.json"), out)


# --------------------------------------------------------------------- jobs
def job_fit(impl: str, params: dict, work: str) -> dict:
    """Job 1: fit() of a no-op 2-worker job on a warm cluster."""
    init(impl)
    out: dict = {"metrics": {}, "notes": {}}
    try:
        for kind, key, fits in (("data_parallel", "fit_s", params["fits"]),
                                ("torch", "torch_fit_s", params.get("torch_fits", 0))):
            if not fits:
                continue
            start = time.perf_counter()
            make_trainer(impl, noop_loop, work, f"warmup-{kind}", kind=kind).fit()
            out["notes"][f"{kind}_first_fit_s"] = time.perf_counter() - start
            times = []
            for i in range(fits):
                trainer = make_trainer(impl, noop_loop, work, f"{kind}{i}", kind=kind)
                start = time.perf_counter()
                trainer.fit()
                times.append(time.perf_counter() - start)
            out["metrics"][key] = times
            if len(times) >= 20:  # flat over many fits in one process, or drifting?
                out["notes"][f"{kind}_first_10_median_s"] = statistics.median(times[:10])
                out["notes"][f"{kind}_last_10_median_s"] = statistics.median(times[-10:])
    finally:
        shutdown(impl)
    return out


def job_report(impl: str, params: dict, work: str) -> dict:
    """Job 2: per-report median of K back-to-back metrics-only reports, 2 workers."""
    k = params["k"]
    init(impl)
    try:
        make_trainer(impl, report_loop, work, "report",
                     config={"impl": impl, "k": k, "dir": work}).fit()
    finally:
        shutdown(impl)
    ranks = [read_json(os.path.join(work, f"times_{r}.json")) for r in range(2)]
    return {"metrics": {"report_s": [statistics.median(ranks[0])]},
            "notes": {"k": k, "rank1_median_s": statistics.median(ranks[1])}}


def job_recovery(impl: str, params: dict, work: str) -> dict:
    """Job 3: from rank 1's SIGKILL until the training function runs again on every rank;
    DataParallelTrainer, then TorchTrainer (its process group re-formed before the function
    runs again), each on a fresh folder, one cluster."""
    out: dict = {"metrics": {}, "notes": {}}
    init(impl)
    try:
        for kind, key in (("data_parallel", "recovery_s"), ("torch", "torch_recovery_s")):
            if kind == "torch" and not params.get("torch", True):
                continue
            run_dir = os.path.join(work, kind)
            os.makedirs(run_dir)
            make_trainer(impl, recovery_loop, os.path.join(work, "storage"), f"recovery-{kind}",
                         max_failures=1, config={"impl": impl, "dir": run_dir}, kind=kind).fit()
            killed = read_json(os.path.join(run_dir, "kill.json"))
            restarted = [read_json(os.path.join(run_dir, f"restart_{r}.json")) for r in range(2)]
            out["metrics"][key] = [max(restarted) - killed]
            out["notes"][f"{kind}_per_rank_s"] = [r - killed for r in restarted]
    finally:
        shutdown(impl)
    return out


def job_checkpoint(impl: str, params: dict, work: str) -> dict:
    """Job 4: one report() carrying 2 ranks x size_mb of checkpoint files; copy and move."""
    from physical_limits import write_random_file

    size_mb = params["size_mb"]
    storage = os.path.join(work, "storage")
    local = [os.path.join(work, "local", f"rank{r}") for r in range(2)]
    for r, d in enumerate(local):
        os.makedirs(d)
        write_random_file(os.path.join(d, f"shard_{r}.bin"), size_mb)
    os.sync()  # no write-back of these files during the timed reports
    init(impl)
    try:
        make_trainer(impl, checkpoint_loop, storage, "checkpoint",
                     config={"impl": impl, "dir": work, "local": local}).fit()
    finally:
        shutdown(impl)
    per_rank = [read_json(os.path.join(work, f"ckpt_{r}.json")) for r in range(2)]
    copy = max(r["copy"] for r in per_rank)
    move = max(r["move"] for r in per_rank)
    total_mb = 2 * size_mb
    return {"metrics": {"ckpt_copy_s": [copy], "ckpt_copy_mbps": [total_mb / copy],
                        "ckpt_move_s": [move]},
            "notes": {"size_mb_per_rank": size_mb, "per_rank_s": per_rank,
                      "local_left_after_move": [os.path.exists(d) for d in local]}}


def _two_noop_fits(impl: str, work: str, name: str, workers: int) -> list[float]:
    """Two timed no-op fits on the cluster `init()` connected to, then `shutdown()`."""
    try:
        fits = []
        for i in range(2):
            trainer = make_trainer(impl, noop_loop, work, f"{name}{i}", workers=workers)
            start = time.perf_counter()
            trainer.fit()
            fits.append(time.perf_counter() - start)
        return fits
    finally:
        shutdown(impl)


def job_scale(impl: str, params: dict, work: str) -> dict:
    """Job 5: no-op fit() with many workers on many simulated nodes (reference only)."""
    if impl != "reference":
        raise RuntimeError("the scale job runs on the reference only")
    from proctree import PeakRss, tree_rss_bytes

    import simcluster

    try:  # the modules reference.init() preloads in the clusters it starts itself
        from reference import PRELOAD
    except ImportError:
        PRELOAD = ("reference.train",)  # noqa: N806

    nodes, workers = params["nodes"], params["workers"]
    with PeakRss(interval_s=0.05) as peak:
        start = time.perf_counter()
        # As `reference.init()` does for its own cluster: supervisors import the worker
        # runtime once, so 256 forked workers do not each import it.
        with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=4)] * nodes,
                                preload=PRELOAD) as cluster:
            cluster_s = time.perf_counter() - start
            idle_rss = tree_rss_bytes(os.getpid())[0]
            init(impl, address=cluster.address)
            fits = _two_noop_fits(impl, work, "scale", workers)
    metrics = {"scale_cluster_s": [cluster_s], "scale_fit_first_s": [fits[0]],
               "scale_fit_s": [fits[1]], "scale_peak_rss": [float(peak.peak_bytes)],
               "scale_peak_used": [float(peak.peak_used_bytes - peak.base_used_bytes)]}
    if params.get("user_built", True):
        # A cluster as a user builds it, with no `preload=`: reference.init(address=...)
        # asks its nodes to import the runtime (timed as part of init), then the fits.
        with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=4)] * nodes) as cluster:
            start = time.perf_counter()
            init(impl, address=cluster.address)
            metrics["scale_user_init_s"] = [time.perf_counter() - start]
            user_fits = _two_noop_fits(impl, work, "user", workers)
        metrics["scale_user_fit_first_s"] = [user_fits[0]]
        metrics["scale_user_fit_s"] = [user_fits[1]]
    return {"metrics": metrics,
            "notes": {"nodes": nodes, "workers": workers, "peak_processes": peak.peak_procs,
                      "rss_samples": peak.samples,
                      "sampler_cpu_s": peak.sampler_cpu_s, "rss_before_fit": idle_rss}}


JOBS = {"1": job_fit, "2": job_report, "3": job_recovery, "4": job_checkpoint, "5": job_scale}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, choices=sorted(JOBS))
    parser.add_argument("--impl", required=True, choices=["reference", "ray"])
    parser.add_argument("--params", default="{}")
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    if args.impl == "ray":
        os.environ.update(RAY_ENV)
    # A SIGTERM from the harness still runs the `finally` blocks (ray.shutdown()).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix=f"trainspec-bench-{args.job}-{args.impl}-")
    try:
        result = JOBS[args.job](args.impl, json.loads(args.params), work)
    except BaseException as exc:  # noqa: BLE001 - reported to the harness as data
        result = {"error": f"{type(exc).__name__}: {exc}"[:2000],
                  "traceback": traceback.format_exc()[-4000:]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(args.result, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
