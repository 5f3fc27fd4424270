"""XGBoost and LightGBM benchmark (not a test): a 2-worker fit against single-process
training and against Ray 2.60, side by side.

    python ci/bench/gbdt_bench.py [--rows 100000] [--features 20] [--rounds 50]
                                  [--repeats 3] [--sides single,single-1t,reference,ray]

For each framework it prints the wall time of
  single:    one process, all `--workers` threads (nthread / num_threads = workers):
             building the data, splitting it into the workers' row shards (what the
             distributed side does on top) and training on the whole data: the limit;
  single-1t: the same with one thread (on a loaded machine OpenMP's barriers make the
             threaded run slower than this; then this is the fairer limit);
  reference: `fit()` of XGBoostTrainer / LightGBMTrainer with `--workers` workers (one CPU
             and so one OpenMP thread each), on a warm cluster (one untimed fit first);
  ray:       the same training function on Ray 2.60, on a warm Ray session.
Every training function builds the same synthetic data (seeded), takes its rows
(`X[rank::workers]`), trains `--rounds` rounds with an evaluation on its shard, and reports
every round through RayTrainReportCallback (a checkpoint at the end). Each measurement runs
in a fresh process; the sides alternate in every repeat, and the median and best of
`--repeats` are shown. Targets: reference <= 1.2x single, and >= 5x faster than Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
FRAMEWORKS = ("xgboost", "lightgbm")


def make_data(rows: int, features: int):
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, features)).astype("float32")
    y = (x[:, 0] + x[:, 1] * x[:, 2] - 0.5 * x[:, 3] + rng.normal(scale=0.3, size=rows)
         > 0).astype("float32")
    return x, y


def train_shard(config: dict, rank: int, world: int, threads: int, report: bool):
    """Train on this rank's rows; returns the number of rounds of the model."""
    x, y = make_data(config["rows"], config["features"])
    x, y = x[rank::world], y[rank::world]
    impl = config.get("impl")
    if config["framework"] == "xgboost":
        import xgboost

        callbacks = []
        if report:
            import importlib

            callbacks = [importlib.import_module(f"{impl}.train.xgboost").RayTrainReportCallback()]
        d = xgboost.DMatrix(x, label=y, nthread=threads)
        booster = xgboost.train(
            {"objective": "binary:logistic", "tree_method": "hist", "max_depth": 6,
             "nthread": threads, "eval_metric": "logloss"},
            d, num_boost_round=config["rounds"], evals=[(d, "train")], verbose_eval=False,
            callbacks=callbacks)
        return booster.num_boosted_rounds()
    import lightgbm

    params = {"objective": "binary", "num_leaves": 63, "num_threads": threads,
              "verbose": -1, "metric": "binary_logloss"}
    callbacks = []
    if report:
        import importlib

        lgb = importlib.import_module(f"{impl}.train.lightgbm")
        params.update(tree_learner="data", **lgb.get_network_params())
        callbacks = [lgb.RayTrainReportCallback()]
    d = lightgbm.Dataset(x, label=y)
    booster = lightgbm.train(params, d, num_boost_round=config["rounds"], valid_sets=[d],
                             valid_names=["train"], callbacks=callbacks)
    return booster.num_trees()


def worker_fn(config: dict):
    import importlib

    context = importlib.import_module(config["impl"] + ".train").get_context()
    return train_shard(config, context.get_world_rank(), context.get_world_size(), 1, True)


# --------------------------------------------------------------------------- the children
def child_single(config: dict, threads: int) -> float:
    import importlib

    import numpy as np

    importlib.import_module(config["framework"])  # imported before the clock, as in workers
    start = time.perf_counter()
    x, y = make_data(config["rows"], config["features"])
    shards = [(x[r::config["workers"]], y[r::config["workers"]]) for r in range(config["workers"])]
    np.concatenate([s for s, _ in shards])  # the split, as the distributed side pays it
    train_shard(config, 0, 1, threads, False)
    return time.perf_counter() - start


def _trainer(impl: str, framework: str):
    import importlib

    module = importlib.import_module(f"{impl}.train.{framework}")
    return module.XGBoostTrainer if framework == "xgboost" else module.LightGBMTrainer


def _fit(impl: str, config: dict, storage: str, name: str) -> float:
    import importlib

    train = importlib.import_module(impl + ".train")
    trainer = _trainer(impl, config["framework"])(
        worker_fn, train_loop_config=dict(config, impl=impl),
        scaling_config=train.ScalingConfig(num_workers=config["workers"]),
        run_config=train.RunConfig(storage_path=storage, name=name))
    start = time.perf_counter()
    result = trainer.fit()
    elapsed = time.perf_counter() - start
    assert result.return_value == config["rounds"], result.return_value
    return elapsed


def child_distributed(impl: str, config: dict) -> float:
    if impl == "ray":
        import ray

        os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.1")
        ray.init(num_cpus=config["workers"], include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as storage:
        try:
            _fit(impl, dict(config, rounds=2, rows=1000), storage, "warm")  # warm cluster
            return _fit(impl, config, storage, "timed")
        finally:
            if impl == "ray":
                import ray

                ray.shutdown()
            else:
                import reference

                reference.shutdown()


def run_child(side: str, config: dict, timeout: float) -> float:
    command = [sys.executable, __file__, "--child", side, "--config", json.dumps(config)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{side} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--sides", default="single,single-1t,reference,ray")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        config = json.loads(args.config)
        if args.child.startswith("single"):
            value = child_single(config, 1 if args.child == "single-1t" else config["workers"])
        else:
            value = child_distributed(args.child, config)
        print(json.dumps(value))
        return
    sides = [s for s in args.sides.split(",") if s]
    if "ray" in sides:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("ray is not installed: the ray side is skipped")
            sides.remove("ray")
    rows = []
    for framework in args.frameworks.split(","):
        config = {"framework": framework, "rows": args.rows, "features": args.features,
                  "rounds": args.rounds, "workers": args.workers}
        times: dict[str, list[float]] = {s: [] for s in sides}
        for repeat in range(args.repeats):
            order = sides if repeat % 2 == 0 else sides[::-1]
            for side in order:
                elapsed = run_child(side, config, args.timeout)
                times[side].append(elapsed)
                print(f"[{framework} {repeat + 1}/{args.repeats}] {side}: {elapsed:.3f} s",
                      flush=True)
        rows.append((framework, times))
    load = os.getloadavg()[0]
    print(f"\n{args.workers} workers, {args.rows} x {args.features} rows, {args.rounds} rounds, "
          f"{args.repeats} alternating repeats, load average {load:.1f}; seconds as median "
          "(best)")
    header = f"{'framework':<10}" + "".join(f"{s:>20}" for s in sides)
    if "single" in sides and "reference" in sides:
        header += f"{'reference/single':>18}"
    if "ray" in sides and "reference" in sides:
        header += f"{'ray/reference':>15}"
    print(header)
    for framework, times in rows:
        med = {s: statistics.median(v) for s, v in times.items()}
        line = f"{framework:<10}" + "".join(
            f"{f'{med[s]:.2f} ({min(times[s]):.2f})':>20}" for s in sides)
        if "single" in med and "reference" in med:
            line += f"{med['reference'] / med['single']:>17.2f}x"
        if "ray" in med and "reference" in med:
            line += f"{med['ray'] / med['reference']:>14.1f}x"
        print(line)


if __name__ == "__main__":
    main()
