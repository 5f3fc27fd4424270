"""Trainables for the Tuner tests: module-level so trial processes unpickle them by
reference, each recording what it saw in files under the trial's config["out"]."""

from __future__ import annotations

import json
import os
import tempfile
import time

import reference.train as train
import reference.tune as tune


def _record(config: dict, kind: str, **values) -> None:
    with open(os.path.join(config["out"], f"{tune.get_context().get_trial_id()}.{kind}"),
              "a") as f:
        f.write(json.dumps(values) + "\n")


def steps(config: dict) -> None:
    """`config["steps"]` reports of loss = a * (steps - i), a checkpoint on every other."""
    ctx = tune.get_context()
    _record(config, "context", trial_id=ctx.get_trial_id(), name=ctx.get_trial_name(),
            dir=ctx.get_trial_dir(), experiment=ctx.get_experiment_name(),
            resources=ctx.get_trial_resources().bundles, cwd=os.getcwd(), pid=os.getpid(),
            start=time.time(), restored=str(tune.get_checkpoint()))
    n = config.get("steps", 3)
    for i in range(n):
        checkpoint = None
        if i % 2:
            d = tempfile.mkdtemp()
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(i))
            checkpoint = tune.Checkpoint.from_directory(d)
        tune.report({"loss": config["a"] * (n - i), "nested": {"x": i}}, checkpoint=checkpoint)
        time.sleep(config.get("sleep", 0))
    _record(config, "end", end=time.time())


def raises_for_two(config: dict) -> None:
    tune.report({"loss": config["a"]})
    if config["a"] == 2:
        raise ValueError("trial with a=2 fails")
    tune.report({"loss": config["a"] - 0.5})


def dies_once(config: dict) -> None:
    """Reports steps 1..4 with a checkpoint each; the first process dies after step 2."""
    restored = tune.get_checkpoint()
    start = 0
    if restored:
        with restored.as_directory() as d, open(os.path.join(d, "step")) as f:
            start = int(f.read())
    _record(config, "start", start=start)
    for step in range(start + 1, 5):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "step"), "w") as f:
            f.write(str(step))
        tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(d))
        marker = os.path.join(config["out"], "died")
        if step == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)


def uses_train_api(config: dict) -> None:
    try:
        train.report({"x": 1})
    except DeprecationWarning as exc:
        tune.report({"message": str(exc)})


def with_data(config: dict, data=None) -> None:
    tune.report({"total": sum(data) * config["a"]})


def torch_driver(config: dict) -> None:
    """A Train run per trial, reporting through TuneReportCallback (the Ray 2.60 pattern)."""
    from reference.train.torch import TorchTrainer
    from reference.tune.integration.ray_train import TuneReportCallback

    trainer = TorchTrainer(
        torch_loop, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(
            name=f"train-trial_id={tune.get_context().get_trial_id()}",
            storage_path=config["out"], callbacks=[TuneReportCallback()]))
    trainer.fit()


def torch_loop(config: dict) -> None:
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["out"], f"worker-{os.getpid()}"), "w") as f:
        f.write(str(rank))
    for step in range(config.get("steps", 4)):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(step))
            train.report({"loss": config["a"] * (10 - step) + rank, "step": step + 1},
                         checkpoint=train.Checkpoint.from_directory(d) if step == 1 else None)
        time.sleep(config.get("sleep", 0))


def quadratic(config: dict) -> None:
    """loss = (x - 3)^2 + y, reported 3 times (the last is the trial's value)."""
    for i in range(3):
        tune.report({"loss": (config["x"] - 3) ** 2 + config["y"] + (2 - i)})


class _DieAfterSecondReport(train.UserCallback):
    def __init__(self, marker: str):
        self.marker, self.reports = marker, 0

    def after_report(self, run_context, metrics, checkpoint) -> None:
        self.reports += 1
        if self.reports == 2 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(7)  # the trial's own process dies, its Train workers with it


def torch_driver_dies_once(config: dict) -> None:
    """The trial process dies after its Train run's 2nd report (first attempt only); the
    restarted trial's Train run has the same name, so it resumes from its checkpoint."""
    from reference.train.torch import TorchTrainer
    from reference.tune.integration.ray_train import TuneReportCallback

    TorchTrainer(
        torch_resuming_loop, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(
            name=f"train-trial_id={tune.get_context().get_trial_id()}",
            storage_path=config["out"],
            callbacks=[TuneReportCallback(),
                       _DieAfterSecondReport(os.path.join(config["out"], "died"))])).fit()


def torch_resuming_loop(config: dict) -> None:
    checkpoint = train.get_checkpoint()
    start = 0
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "step")) as f:
            start = int(f.read()) + 1
    if train.get_context().get_world_rank() == 0:
        with open(os.path.join(config["out"], "train-starts"), "a") as f:
            f.write(f"{start}\n")
    for step in range(start, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(step))
            train.report({"step": step + 1}, checkpoint=train.Checkpoint.from_directory(d))


def pbt_fn(config: dict) -> None:
    """value grows by lr per step; the checkpoint holds value, step and whose it was."""
    me = tune.get_context().get_trial_id()
    value, step, origin = 0.0, 0, None
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            state = json.load(f)
        value, step, origin = state["value"], state["step"], state["trial"]
    _record(config, "start", step=step, origin=origin, lr=config["lr"])
    while step < 8:
        step += 1
        value += config["lr"]
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump({"value": value, "step": step, "trial": me}, f)
        tune.report({"value": value, "step": step},
                    checkpoint=tune.Checkpoint.from_directory(d))
        # paced so that trial processes started up to a second apart (a loaded machine)
        # still meet at the perturbation steps
        time.sleep(0.15)


def logged(config: dict) -> None:
    """Results of every kind a logger meets (nested, empty, strings, lists, numpy); the
    trial with a=2 fails after its first report."""
    import numpy as np

    for i in range(3):
        tune.report({"loss": config["a"] * (3 - i), "nested": {"x": i, "none": {}},
                     "name": "n", "hist": [1.0, 2.0, float(i)], "half": np.float32(0.5),
                     "flag": True})
        if config["a"] == 2:
            raise ValueError("trial with a=2 fails")


#: the key `hook_key` gives (test_wandb.py's WANDB_SETUP_API_KEY_HOOK)
HOOK_KEY = "h" * 40


def hook_key() -> str:
    return HOOK_KEY
