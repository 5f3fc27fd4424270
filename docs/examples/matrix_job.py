"""A job file for the fault matrix: your own training code under every fault kind.

    python -m conformance matrix --impl reference --job docs/examples/matrix_job.py
    python -m conformance matrix --impl reference --job docs/examples/matrix_job.py \\
        --faults worker-sigkill,preemption,failed-upload

The matrix imports this file, runs `train_func` on every worker of each cell's trainer
(`TRAINER`, default DataParallelTrainer) with `CONFIG` plus `steps` (how many reports to
make) and `impl` (the import root of the implementation: "reference" or "ray"), injects the
cell's fault, and judges the run. What it asks of the job (see docs/fault_matrix.md):
- every `train.report()` carries `metrics["step"]`, the report's index in the whole run;
- a checkpoint is reported (here by rank 0, each step), and a restarted worker resumes from
  `train.get_checkpoint()`, continuing at the step after the one it holds.

The model is one weight and one bias fitted to y = 3x + 1 by plain gradient descent, so
the file needs nothing beyond the standard library; the state lives in `state.json`.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import tempfile

CONFIG = {"lr": 0.1, "batch": 32}


def _load(checkpoint) -> dict:
    if checkpoint is None:
        return {"step": -1, "w": 0.0, "b": 0.0}
    with checkpoint.as_directory() as d:
        with open(os.path.join(d, "state.json")) as f:
            return json.load(f)


def train_func(config: dict) -> None:
    train = importlib.import_module(config["impl"] + ".train")
    rank = train.get_context().get_world_rank()
    state = _load(train.get_checkpoint())
    rng = random.Random(1000 * rank + state["step"] + 1)
    for step in range(state["step"] + 1, config["steps"]):
        xs = [rng.uniform(-1, 1) for _ in range(config["batch"])]
        errors = [(state["w"] * x + state["b"]) - (3 * x + 1) for x in xs]
        state["w"] -= config["lr"] * 2 * sum(e * x for e, x in zip(errors, xs, strict=True)) / len(xs)
        state["b"] -= config["lr"] * 2 * sum(errors) / len(xs)
        state["step"] = step
        loss = sum(e * e for e in errors) / len(errors)
        if rank == 0:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump(state, f)
                train.report({"step": step, "loss": loss},
                             checkpoint=train.Checkpoint.from_directory(d))
        else:
            train.report({"step": step, "loss": loss})
