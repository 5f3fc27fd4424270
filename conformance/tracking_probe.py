"""The training function of the tracker setup checks (check_tracking.py), a module of its
own so that a worker unpickling it imports neither pytest nor a check module.

`setup_on_every_rank(config)`: each rank calls `setup_mlflow` or `setup_wandb` (of the
implementation's `air.integrations`, config["tracker"]) as a user's training function
does, logs one metric through what it got back, and journals what that was: the tracker
module or run itself on rank 0, a stand-in on the others."""

from __future__ import annotations

import importlib
import os

from conformance.probe import Journal

#: the config each rank passes to the setup function (logged as params / W&B config)
LOGGED = {"lr": 0.5, "layers": {"hidden": 8}}


def setup_on_every_rank(config: dict) -> None:
    train = importlib.import_module(config["train_module"])
    integrations = importlib.import_module(config["integrations"] + "." + config["tracker"])
    rank = train.get_context().get_world_rank()
    journal = Journal(config["journal"])
    if config["tracker"] == "mlflow":
        got = integrations.setup_mlflow(dict(LOGGED), tracking_uri=config["uri"],
                                        experiment_name="ranks",
                                        create_experiment_if_not_exists=True)
        real = got is importlib.import_module("mlflow")
        got.log_metric("rank_metric", 1.0 + rank)
        got.end_run()
        journal.record(ev="setup", rank=rank, real=real, kind=type(got).__name__)
        return
    # W&B offline, as a user without an API key sets it up in the function; each rank's
    # files (if it writes any) in a folder of its own
    os.environ["WANDB_MODE"], os.environ["WANDB_SILENT"] = "offline", "true"
    folder = os.path.join(config["wandb_dir"], f"rank{rank}")
    os.makedirs(folder, exist_ok=True)
    run = integrations.setup_wandb(dict(LOGGED), project="conformance", mode="offline",
                                   dir=folder)
    run.log({"rank_metric": 1.0 + rank})
    disabled = bool(getattr(run, "disabled", False)) or run.settings.mode == "disabled"
    run.finish()
    journal.record(ev="setup", rank=rank, real=not disabled, kind=type(run).__name__)
