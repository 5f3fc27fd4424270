"""What each tracker costs the Tune loop per result, the reference beside Ray 2.60.

    python ci/bench/tracker_bench.py [--trials 16] [--results 100] [--impl both]
                                     [--tracker csv --tracker wandb ...]

For each implementation and tracker, a child process runs a Tuner of `--trials` trials
(2 at a time) whose function reports `--results` small results as fast as it can, with
the auto loggers off (TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1) and the one tracker in
`RunConfig(callbacks=[...])`, as a subclass whose `log_trial_result` is timed with
`perf_counter_ns`: the time the tracker holds the loop's thread for a result, which is
what a slow tracker takes from every trial. It prints the median, the 99th percentile and
the number of results seen, per tracker, side by side. Trackers: csv, json, tbx (the
default loggers), mlflow (a SQLite store in the run's tmp folder), wandb (WANDB_MODE
offline). Ray: `ray.init(address="local", num_cpus=4)`. Each child has a deadline; its
process group is killed when it passes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TRACKERS = {
    "csv": ("tune.logger", "CSVLoggerCallback", {}),
    "json": ("tune.logger", "JsonLoggerCallback", {}),
    "tbx": ("tune.logger", "TBXLoggerCallback", {}),
    "mlflow": ("air.integrations.mlflow", "MLflowLoggerCallback",
               {"tracking_uri": "sqlite:///{tmp}/mlflow.db", "experiment_name": "bench"}),
    "wandb": ("air.integrations.wandb", "WandbLoggerCallback", {"project": "bench"}),
}
DEADLINE_S = 600


def child(impl: str, tracker: str, trials: int, results: int, tmp: str) -> dict:
    import importlib

    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    os.environ["WANDB_MODE"], os.environ["WANDB_SILENT"] = "offline", "true"
    root = "ray" if impl == "ray" else "reference"
    if impl == "ray":
        import ray

        ray.init(address="local", num_cpus=4, include_dashboard=False,
                 log_to_driver=False)
    tune = importlib.import_module(f"{root}.tune")
    module, name, kwargs = TRACKERS[tracker]
    base = getattr(importlib.import_module(f"{root}.{module}"), name)
    kwargs = {k: v.format(tmp=tmp) if isinstance(v, str) else v for k, v in kwargs.items()}
    spent: list[int] = []

    class Timed(base):
        def log_trial_result(self, iteration, trial, result):
            start = time.perf_counter_ns()
            super().log_trial_result(iteration, trial, result)
            spent.append(time.perf_counter_ns() - start)

    def fn(config):
        for i in range(config["results"]):
            tune.report({"loss": 1.0 / (i + 1), "step": i, "nested": {"a": i}})

    tuner = tune.Tuner(
        fn, param_space={"results": results, "i": tune.grid_search(list(range(trials)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(name="bench", storage_path=tmp, verbose=0,
                                  callbacks=[Timed(**kwargs)]))
    start = time.monotonic()
    grid = tuner.fit()
    wall = time.monotonic() - start
    errors = sum(r.error is not None for r in grid)
    if impl == "ray":
        ray.shutdown()
    spent.sort()
    return {"n": len(spent), "median_us": statistics.median(spent) / 1e3 if spent else None,
            "p99_us": spent[int(len(spent) * 0.99) - 1] / 1e3 if spent else None,
            "wall_s": wall, "errors": errors}


def launch(impl: str, tracker: str, trials: int, results: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
        env = {**os.environ, "HOME": tmp, "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", impl, tracker, str(trials), str(results),
             tmp], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            start_new_session=True)
        try:
            out, err = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"error": f"no result within {DEADLINE_S} s"}
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what the child left behind
            except ProcessLookupError:
                pass
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        return {"error": (err.strip().splitlines() or ["no output"])[-1][:200]}


def cell(got: dict) -> str:
    if "error" in got:
        return f"error: {got['error']}"
    if not got["n"]:
        return f"no result timed (errors {got['errors']})"
    return (f"{got['median_us']:8.1f} us  p99 {got['p99_us']:8.1f} us  n={got['n']}"
            f"  fit {got['wall_s']:.1f} s")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        impl, tracker, trials, results, tmp = sys.argv[2:7]
        print(json.dumps(child(impl, tracker, int(trials), int(results), tmp)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--results", type=int, default=100)
    parser.add_argument("--impl", choices=("reference", "ray", "both"), default="both")
    parser.add_argument("--tracker", action="append", choices=sorted(TRACKERS))
    args = parser.parse_args()
    impls = ("reference", "ray") if args.impl == "both" else (args.impl,)
    print(f"{args.trials} trials x {args.results} results, 2 at a time; time a tracker "
          f"holds the Tune loop per result; load average {os.getloadavg()[0]:.2f}")
    for tracker in args.tracker or list(TRACKERS):
        for impl in impls:
            print(f"{tracker:7s} {impl:9s} {cell(launch(impl, tracker, args.trials, args.results))}",
                  flush=True)


if __name__ == "__main__":
    main()
