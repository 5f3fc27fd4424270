"""Tune benchmark (not a test): the reference's Tuner and Ray 2.60's side by side, on the
jobs a user runs.

    python ci/bench/tune_bench.py [--sides reference,ray] [--rounds 3] [--ray-rounds 1]
        [--trials 200] [--timeout 300] [--json out.json]

1. workflow: the seeds' workflow 3 in its Ray 2.60 form. A function trainable per trial
   builds a 2-worker TorchTrainer (DDP over gloo, a linear model, 8 reports of one SGD step
   each, a checkpoint at every report) with `RunConfig(name="train-trial_id=<id>",
   callbacks=[TuneReportCallback()])`; 4 trials (a grid of 4 learning rates, the best
   first), ASHA (max_t 8, grace 1, reduction 2) on the reported loss, 2 concurrent trials,
   each trial's driver taking 1 CPU. At 16 logical CPUs, and at 4 (where Ray 2.60 hung:
   see docs/tune.md); a side that does not finish within --timeout is reported as such.
2. trial overhead: --trials no-op function trials (one `tune.report`) at 16 logical CPUs
   (as many concurrent as fit, each 1 CPU).

Each launch is a fresh process (`reference.init` / `ray.init(address="local")` with
num_cpus set; RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=0.1 as the test suites use), verbose=0 on
both sides; the figure is the wall time of `Tuner.fit()`; medians of the rounds that
finished. Whatever a launch leaves running is killed after it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

import framework_bench as fb  # noqa: E402

LEARNING_RATES = [0.1, 0.03, 0.01, 0.003]
CASES = [("workflow", 16), ("workflow", 4), ("noop", 16)]


# ------------------------------------------------------------------------- the jobs
def train_loop(config: dict) -> None:
    import torch

    train = importlib.import_module(config["impl"] + ".train")
    ttorch = importlib.import_module(config["impl"] + ".train.torch")
    rank = train.get_context().get_world_rank()
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 4, generator=g)
    y = x.sum(dim=1, keepdim=True)
    model = ttorch.prepare_model(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(8):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        with tempfile.TemporaryDirectory() as d:
            if rank == 0:
                Path(d, "loss").write_text(str(loss.item()))
            train.report({"loss": loss.item()}, checkpoint=train.Checkpoint.from_directory(d))


def train_driver(config: dict) -> None:
    tune = importlib.import_module(config["impl"] + ".tune")
    train = importlib.import_module(config["impl"] + ".train")
    ttorch = importlib.import_module(config["impl"] + ".train.torch")
    ray_train = importlib.import_module(config["impl"] + ".tune.integration.ray_train")
    ttorch.TorchTrainer(
        train_loop, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name=f"train-trial_id={tune.get_context().get_trial_id()}",
                                   storage_path=config["storage"],
                                   callbacks=[ray_train.TuneReportCallback()])).fit()


def noop(config: dict) -> None:
    tune = importlib.import_module(config["impl"] + ".tune")
    tune.report({"score": config["i"]})


def child(impl: str, case: str, cpus: int, trials: int, out: str) -> None:
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.1")
    root = importlib.import_module(impl)
    importlib.import_module(impl + ".train.torch")  # as a script's `from ... import TorchTrainer`
    tune = importlib.import_module(impl + ".tune")
    schedulers = importlib.import_module(impl + ".tune.schedulers")
    storage = tempfile.mkdtemp(prefix=f"tune-bench-{impl}-")
    if impl == "ray":
        root.init(address="local", num_cpus=cpus, include_dashboard=False,
                  log_to_driver=False)
    else:
        root.init(num_cpus=cpus)
    if case == "workflow":
        tuner = tune.Tuner(
            train_driver,
            param_space={"impl": impl, "storage": storage,
                         "lr": tune.grid_search(LEARNING_RATES)},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=2,
                scheduler=schedulers.ASHAScheduler(metric="loss", mode="min", max_t=8,
                                                   grace_period=1, reduction_factor=2)),
            run_config=tune.RunConfig(name="workflow", storage_path=storage, verbose=0))
    else:
        tuner = tune.Tuner(
            noop, param_space={"impl": impl, "i": tune.grid_search(list(range(trials)))},
            run_config=tune.RunConfig(name="noop", storage_path=storage, verbose=0))
    start = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - start
    record = {"wall": wall, "trials": len(grid), "errors": grid.num_errors}
    if case == "workflow":
        iters = [r.metrics.get("training_iteration") for r in grid]
        record["stopped_early"] = sum(1 for i in iters if i is not None and i < 8)
        record["best_lr"] = grid.get_best_result("loss", "min").config["lr"]
    fb.write_json(out, record)
    root.shutdown()


# ------------------------------------------------------------------------- the driver
def launch(impl: str, case: str, cpus: int, args) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "out.json")
        rc, wall, text = fb.run_command(
            [sys.executable, __file__, "--child", impl, case, str(cpus), str(args.trials), out],
            args.timeout)
        if rc is None:
            return {"timeout": True}
        if rc != 0 or not os.path.exists(out):
            return {"failed": text.strip().splitlines()[-1:] or [f"exit status {rc}"]}
        return fb.read_json(out)


def summarize(records: list[dict]) -> dict:
    done = [r for r in records if "wall" in r]
    summary = {"rounds": len(records), "finished": len(done)}
    if done:
        summary["wall_median_s"] = statistics.median(r["wall"] for r in done)
        summary["last"] = done[-1]
    else:
        summary["outcome"] = ("did not finish within the deadline"
                              if any(r.get("timeout") for r in records)
                              else f"failed: {records[-1].get('failed')}")
    return summary


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        impl, case, cpus, trials, out = sys.argv[2:7]
        child(impl, case, int(cpus), int(trials), out)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default="reference,ray")
    parser.add_argument("--cases", default=",".join(f"{c}@{n}" for c, n in CASES),
                        help="which of " + ", ".join(f"{c}@{n}" for c, n in CASES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ray-rounds", type=int, default=1)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    fb.setup_environment()
    sides = args.sides.split(",")
    if "ray" in sides and (why := fb.ray_importable()):
        print(f"ray is not importable ({why}): reference only")
        sides = [s for s in sides if s != "ray"]
    results: dict = {}
    cases = [(c, int(n)) for c, _, n in (x.partition("@") for x in args.cases.split(","))]
    for case, cpus in cases:
        for impl in sides:
            rounds = args.ray_rounds if impl == "ray" else args.rounds
            records = [launch(impl, case, cpus, args) for _ in range(rounds)]
            results[f"{case}@{cpus}/{impl}"] = summarize(records)
            print(f"{case:9s} {cpus:2d} CPUs {impl:9s} {json.dumps(results[f'{case}@{cpus}/{impl}'])}",
                  flush=True)
    print()
    print(f"{'job':34s} {'reference s':>12s} {'ray s':>12s} {'ray/reference':>14s}")
    for case, cpus in cases:
        label = (f"workflow 3, 4 trials x 2 workers, {cpus} CPUs" if case == "workflow"
                 else f"{args.trials} no-op trials, {cpus} CPUs")
        ref = results.get(f"{case}@{cpus}/reference", {})
        ray = results.get(f"{case}@{cpus}/ray", {})

        def cell(s):
            return f"{s['wall_median_s']:.2f}" if "wall_median_s" in s else (
                f"> {args.timeout:.0f}" if "deadline" in s.get("outcome", "")
                else s.get("outcome", "-")[:12])
        ratio = (f"{ray['wall_median_s'] / ref['wall_median_s']:.1f}x"
                 if "wall_median_s" in ref and "wall_median_s" in ray else "-")
        print(f"{label:34s} {cell(ref):>12s} {cell(ray):>12s} {ratio:>14s}")
    if args.json:
        fb.write_json(args.json, results)


if __name__ == "__main__":
    main()
