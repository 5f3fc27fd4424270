"""Trainables of the Tune checks (clauses `tune.*`).

Every trainable is a module-level function (it pickles by reference into the process that
runs the trial) taking the trial's config. The config carries the probe's settings beside
the searched values: `tune_module` (the module playing `ray.tune`, e.g. "reference.tune"),
`journal` (a folder shared by every trial of the run) and, for some, `train_module`. Each
trial journals what it saw (`conformance.probe.Journal`): its context, what
`get_checkpoint()` gave, every report it made (written just before and just after the
call, with the process's monotonic clock, which is system-wide on Linux), and what an API
raised. Checks compare that record with the ResultGrid the Tuner returned.

- `trial`: the main run; reports REPORTS times `{"score": SCORES[x][i], "step": i}` and
  attaches a checkpoint (file `step.txt`) at the steps in CHECKPOINT_STEPS;
- `error_trial`: the trial with `x == FAIL_X` raises ValueError(FAIL_MESSAGE) after its first
  report, once (a marker file in the journal folder says it did);
- `stop_trial` and `asha_trial`: report up to REPORTS times, `{"step": i}` or
  `{"loss": x, "step": i}`;
- `retry_trial`: two checkpointed reports, then `os._exit(1)` once; a restarted trial goes on
  from `get_checkpoint()`;
- `params_trial`: what `with_parameters` passed and what the trial's resources are;
- `driver_trial`: the Train-in-Tune pattern; runs a TorchTrainer whose workers run
  `interop_worker` and whose run reports to Tune through TuneReportCallback.

The driver side is here too, as picklable objects the adapter's `fit` calls where the
implementation's driver runs (a Ray task on Ray): `TunerFactory` builds a Tuner,
`RestoreFactory` a restored one, and `FitEach` fits several Tuners in turn and returns what
each did (so that fits that must raise cost one adapter call and no session reset).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import tempfile
import time
from typing import Any

from conformance.probe import Journal

REPORTS = 6
#: x -> the score of each report; with mode="min" each scope of get_best_result has a
#: different winner: "last" x=1, "all" x=2, "avg" (and "last-10-avg") x=3, "last-5-avg" x=4
SCORES = {
    1: [10, 10, 10, 10, 10, 0],
    2: [-5, 10, 10, 10, 10, 10],
    3: [-4, 2, 2, 2, 2, 2],
    4: [30, 1, 1, 1, 1, 1],
}
CHECKPOINT_STEPS = (2, 4)
FAIL_X = 1
FAIL_MESSAGE = "conformance probe: trial x=1 fails"
#: the steps of retry_trial: checkpointed reports of steps 0 and 1, os._exit(1) once, then 2, 3
RETRY_STEPS = 4
RETRY_EXIT_AFTER = 1
INTEROP_STEPS = 3
INTEROP_CHECKPOINT_STEP = 1
#: what params_trial gets through tune.with_parameters
DATA = {"name": "conformance", "rows": list(range(1000))}
#: keys of the config that are the probe's settings, not searched values
SETTINGS = ("tune_module", "train_module", "journal", "storage")


def searched(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in SETTINGS}


def _tune(config: dict):
    return importlib.import_module(config["tune_module"])


def _context(tune) -> dict:
    ctx = tune.get_context()
    return {"trial_id": ctx.get_trial_id(), "trial_name": ctx.get_trial_name(),
            "trial_dir": ctx.get_trial_dir(), "experiment_name": ctx.get_experiment_name()}


def resources_of(tune) -> dict:
    """get_trial_resources() as data: its type, bundles and required_resources."""
    res = tune.get_context().get_trial_resources()
    return {"type": type(res).__name__,
            "bundles": [dict(b) for b in getattr(res, "bundles", None) or []],
            "required": dict(getattr(res, "required_resources", None) or {})}


def _checkpoint_dir(step: int) -> str:
    folder = tempfile.mkdtemp(prefix="trainspec-tune-ckpt-")
    with open(os.path.join(folder, "step.txt"), "w") as f:
        f.write(str(step))
    return folder


def _restored(tune) -> int | None:
    """The step in get_checkpoint()'s step.txt (None: no checkpoint)."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as d:
        with open(os.path.join(d, "step.txt")) as f:
            return int(f.read())


def _report(tune, journal: Journal, trial_id: str, metrics: dict, checkpoint_step=None):
    journal.record(ev="report", trial_id=trial_id, step=metrics["step"], pid=os.getpid())
    if checkpoint_step is None:
        tune.report(metrics)
    else:
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(
            _checkpoint_dir(checkpoint_step)))
    journal.record(ev="reported", trial_id=trial_id, step=metrics["step"], pid=os.getpid())


def trial(config: dict) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    ctx = _context(tune)
    journal.record(ev="start", **ctx, config=searched(config), pid=os.getpid(),
                   checkpoint=_restored(tune), resources=resources_of(tune))
    for i, score in enumerate(SCORES[config["x"]]):
        _report(tune, journal, ctx["trial_id"], {"score": score, "step": i},
                i if i in CHECKPOINT_STEPS else None)
    journal.record(ev="end", trial_id=ctx["trial_id"])


def error_trial(config: dict) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    ctx = _context(tune)
    journal.record(ev="start", **ctx, config=searched(config), pid=os.getpid())
    _report(tune, journal, ctx["trial_id"], {"step": 0, "x": config["x"]})
    marker = os.path.join(config["journal"], f"failed-x={config['x']}")
    if config["x"] == FAIL_X and not os.path.exists(marker):
        open(marker, "w").close()
        journal.record(ev="raise", trial_id=ctx["trial_id"])
        raise ValueError(FAIL_MESSAGE)
    _report(tune, journal, ctx["trial_id"], {"step": 1, "x": config["x"]})
    journal.record(ev="end", trial_id=ctx["trial_id"])


def stop_trial(config: dict) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    ctx = _context(tune)
    journal.record(ev="start", **ctx, config=searched(config))
    for i in range(REPORTS):
        _report(tune, journal, ctx["trial_id"], {"step": i})
    journal.record(ev="end", trial_id=ctx["trial_id"])


def asha_trial(config: dict) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    ctx = _context(tune)
    journal.record(ev="start", **ctx, config=searched(config))
    for i in range(REPORTS):
        _report(tune, journal, ctx["trial_id"], {"loss": float(config["x"]), "step": i})
    journal.record(ev="end", trial_id=ctx["trial_id"])


def retry_trial(config: dict) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    ctx = _context(tune)
    restored = _restored(tune)
    journal.record(ev="start", **ctx, pid=os.getpid(), checkpoint=restored)
    first = 0 if restored is None else restored + 1
    for i in range(first, RETRY_STEPS):
        _report(tune, journal, ctx["trial_id"], {"step": i}, i)
        marker = os.path.join(config["journal"], "exited")
        if i == RETRY_EXIT_AFTER and not os.path.exists(marker):
            open(marker, "w").close()
            journal.record(ev="exit", trial_id=ctx["trial_id"], pid=os.getpid())
            os._exit(1)
    journal.record(ev="end", trial_id=ctx["trial_id"])


def params_trial(config: dict, data=None) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    ctx = _context(tune)
    journal.record(ev="start", **ctx, data=data, resources=resources_of(tune))
    tune.report({"step": 0})


@dataclasses.dataclass
class StopAfter:
    """A stop callable `(trial_id, result) -> bool`: True once result["step"] reaches
    `step`; journals each call (it runs where the Tuner's driver runs)."""

    journal: str
    step: int

    def __call__(self, trial_id, result) -> bool:
        Journal(self.journal).record(ev="stop_call", trial_id=trial_id,
                                     result_trial_id=result.get("trial_id"),
                                     step=result.get("step"),
                                     iteration=result.get("training_iteration"))
        return result.get("step", -1) >= self.step


# ------------------------------------------------------------------ Train inside Tune
def _error(fn) -> dict | None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - journaled as data for the check
        return {"type": type(exc).__name__,
                "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)}
    return None


def driver_trial(config: dict) -> None:
    tune, journal = _tune(config), Journal(config["journal"])
    train = importlib.import_module(config["train_module"])
    root = config["train_module"].rpartition(".")[0]
    torch_trainer = importlib.import_module(f"{config['train_module']}.torch").TorchTrainer
    callback = importlib.import_module(f"{root}.tune.integration.ray_train").TuneReportCallback
    ctx = _context(tune)
    journal.record(ev="start", **ctx, pid=os.getpid(),
                   train_report=_error(lambda: train.report({"step": -1})))
    name = f"train-trial_id={tune.get_context().get_trial_id()}"
    trainer = torch_trainer(
        interop_worker,
        train_loop_config={"train_module": config["train_module"], "journal": config["journal"]},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name=name, storage_path=config["storage"],
                                   callbacks=[callback()]))
    result = trainer.fit()
    journal.record(ev="end", **ctx, train_path=result.path, train_metrics=result.metrics,
                   train_checkpoint=None if result.checkpoint is None else result.checkpoint.path)


def interop_worker(config: dict) -> None:
    train = importlib.import_module(config["train_module"])
    journal = Journal(config["journal"])
    rank = train.get_context().get_world_rank()
    for step in range(INTEROP_STEPS):
        metrics = {"step": step, "rank": rank, "value": 10 * rank + step}
        if step == INTEROP_CHECKPOINT_STEP and rank == 0:
            train.report(metrics, checkpoint=train.Checkpoint.from_directory(
                _checkpoint_dir(step)))
        else:
            train.report(metrics)
        journal.record(ev="train_reported", rank=rank, step=step, wall=time.time())


# ------------------------------------------------------------------ driver side
@dataclasses.dataclass
class TunerFactory:
    """`Tuner(trainable, param_space=..., tune_config=TuneConfig(**tune_config),
    run_config=RunConfig(**run_config))` of the module `tune_module`."""

    tune_module: str
    trainable: Any
    param_space: dict
    tune_config: dict
    run_config: dict
    #: (module, class, kwargs) of callbacks built where the Tuner is (a tracker's callback
    #: holds its client there)
    callbacks: tuple = ()
    #: environment variables set where the Tuner is built, for the callbacks that read
    #: them there (WANDB_MODE); they stay set in that process
    env: tuple = ()

    def __call__(self):
        os.environ.update(dict(self.env))
        tune = importlib.import_module(self.tune_module)
        built = [getattr(importlib.import_module(module), name)(**kwargs)
                 for module, name, kwargs in self.callbacks]
        run_config = dict(self.run_config)
        if built:
            run_config["callbacks"] = built
        return tune.Tuner(self.trainable, param_space=self.param_space,
                          tune_config=tune.TuneConfig(**self.tune_config),
                          run_config=tune.RunConfig(**run_config))


@dataclasses.dataclass
class RestoreFactory:
    tune_module: str
    path: str
    trainable: Any
    kwargs: dict

    def __call__(self):
        tune = importlib.import_module(self.tune_module)
        return tune.Tuner.restore(self.path, self.trainable, **self.kwargs)


@dataclasses.dataclass
class FitEach:
    """Builds and fits each factory in turn; `fit()` returns, per factory, ("built", error)
    when building raised, ("fit", error) when fit() raised, or ("ok", ResultGrid)."""

    factories: list

    def __call__(self):
        return self

    def fit(self) -> list:
        out = []
        for make in self.factories:
            try:
                tuner = make()
            except Exception as exc:  # noqa: BLE001 - the outcome is data for the check
                out.append(("built", exc))
                continue
            try:
                out.append(("ok", tuner.fit()))
            except Exception as exc:  # noqa: BLE001
                out.append(("fit", exc))
        return out
