"""What Tune's logger callbacks leave: each trial's files, as the loggers a Tuner adds by
itself write them (Ray 2.60: `ray/tune/logger/{csv,json,tensorboardx}.py`, added by
`ray/tune/utils/callback.py`; read from the runs check_tune.py makes, no fit of their own),
and the trackers' runs from one Tuner run with both in its callbacks (`_tracked`): the MLflow
runs of `air.integrations.mlflow.MLflowLoggerCallback` in a SQLite store, and the offline
W&B runs of `air.integrations.wandb.WandbLoggerCallback` in the trial folders."""

from __future__ import annotations

import csv
import glob
import importlib.util
import json
import os
import pickle

import pytest

from conformance import assertions, tune_probe, wandb_runs
from conformance.catalogue import clause
from conformance.checks.check_tune import _errors_run, _folder, _main_run
from conformance.scenarios import shared
from conformance.tune_probe import FAIL_X, REPORTS


def _flat(result: dict) -> list[str]:
    """The columns progress.csv has for `result`, in Ray's flattening order: pass by pass,
    a nested dict's keys go to the end, an empty nested dict leaves none."""
    out = {k: v for k, v in result.items() if k != "config"}
    while any(isinstance(v, dict) for v in out.values()):
        nested = {k: v for k, v in out.items() if isinstance(v, dict)}
        out = {k: v for k, v in out.items() if k not in nested}
        for key, value in nested.items():
            out.update({f"{key}/{sub}": v for sub, v in value.items()})
    return list(out)


def _trial_files(result, reports: int, setting: str) -> None:
    what = f"trial {result.metrics.get('trial_id')}"
    folder = result.path
    lines = [json.loads(x) for x in open(os.path.join(folder, "result.json"))]
    # reports=None: a trial that failed after its first report, which check_restore's
    # Tuner.restore(resume_errored=True) may have run again since (its lines appended)
    rerun = reports is None
    seen = [x["training_iteration"] for x in lines]
    assertions.equal(seen if reports else seen[:1], list(range(1, (reports or 1) + 1)),
                     f"{what}: training_iteration of each result.json line", setting)
    reports = reports or len(lines)
    assertions.equal(lines[-1]["config"], result.config,
                     f"{what}: the config in result.json's lines", setting)
    with open(os.path.join(folder, "progress.csv"), newline="") as f:
        rows = list(csv.reader(f))
    assertions.equal((rows[0], len(rows) - 1), (_flat(lines[0]), reports),
                     f"{what}: progress.csv (header: the first result flattened, without "
                     "config; rows: one per result)", setting)
    with open(os.path.join(folder, "params.json")) as f:
        text = f.read()
    assertions.equal(text, json.dumps(result.config, indent=2, sort_keys=True),
                     f"{what}: params.json (the config, indented by 2, keys sorted)", setting)
    with open(os.path.join(folder, "params.pkl"), "rb") as f:
        assertions.equal(pickle.load(f), result.config, f"{what}: params.pkl", setting)
    # the TensorBoard logger only where tensorboardX imports (else a warning, as in Ray)
    expected = 1 if importlib.util.find_spec("tensorboardX") is not None else 0
    events = glob.glob(os.path.join(folder, "events.out.tfevents.*"))
    # a trial run again starts a new SummaryWriter, hence a file of its own
    assertions.equal(min(len(events), expected) if rerun else len(events), expected, f"{what}: TensorBoard event files (tensorboardX "
                     f"{'installed' if expected else 'missing'})", setting)


@clause("tune.trial-files")
def check_trial_files(impl):
    run = _main_run(impl)
    for result in run.grid:
        _trial_files(result, REPORTS, run.setting)
    errors = _errors_run(impl)
    for result in errors.grid:
        failed = result.config["x"] == FAIL_X
        _trial_files(result, None if failed else 2, errors.setting)  # error_trial: 2 reports


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def _tracked(impl):
    """One Tuner run (error_trial over x in 0, 1, 2; x=FAIL_X fails) with the trackers that
    are installed: (grid, setting, MLflow store URI or None, experiment folder, journal)."""
    def build(impl):
        folder, journal = _folder()
        root = impl.tune.__name__.split(".")[0]
        callbacks, env, names = [], {}, []
        uri = None
        if _installed("mlflow", "sqlalchemy"):
            uri = f"sqlite:///{folder}/mlflow.db"
            callbacks.append((f"{root}.air.integrations.mlflow", "MLflowLoggerCallback",
                              {"tracking_uri": uri, "experiment_name": "conformance",
                               "tags": {"suite": "trainspec"}}))
            names.append("MLflowLoggerCallback(sqlite store, experiment_name='conformance', "
                         "tags={'suite': 'trainspec'})")
        if _installed("wandb"):
            # offline: WANDB_MODE where the Tuner runs (the callback's API-key check reads
            # it there) and mode= for the runs (on Ray a logging actor holds each, in a
            # process started before this environment)
            env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
            callbacks.append((f"{root}.air.integrations.wandb", "WandbLoggerCallback",
                              {"project": "conformance", "group": "g", "mode": "offline"}))
            names.append("WandbLoggerCallback(project='conformance', group='g', "
                         "mode='offline')")
        if not callbacks:
            return None
        factory = tune_probe.TunerFactory(
            impl.tune.__name__, tune_probe.error_trial,
            {"tune_module": impl.tune.__name__, "journal": journal,
             "x": impl.tune.grid_search([0, 1, 2])}, {},
            {"name": "tracked", "storage_path": os.path.join(folder, "s")},
            callbacks=tuple(callbacks), env=tuple(env.items()))
        setting = (f"{impl.name}: Tuner(error_trial, x=grid_search([0, 1, 2]), "
                   f"RunConfig(callbacks=[{', '.join(names)}])); x={FAIL_X} fails")
        grid = assertions.succeeded(impl.fit(factory, max(impl.fit_deadline_s, 120.0)),
                                    setting)
        return grid, setting, uri, os.path.join(folder, "s", "tracked"), journal

    return shared(impl, "tracked-tuner", build)


@clause("tune.mlflow-logger")
def check_mlflow_logger_callback(impl):
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    grid, setting, uri, _, journal = _tracked(impl)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("conformance")
    assertions.equal(experiment is not None, True, "the experiment 'conformance' exists",
                     setting)
    runs = {run.data.params.get("x"): run for run in client.search_runs(
        [experiment.experiment_id])}
    assertions.equal(sorted(runs), ["0", "1", "2"], "runs by param x (one per trial)",
                     setting)
    trial_ids = {str(r.config["x"]): r.metrics["trial_id"] for r in grid}
    for x, run in sorted(runs.items()):
        what = f"the run of x={x}"
        failed = x == str(FAIL_X)
        assertions.equal(run.data.params, {"x": x, "journal": journal,
                                           "tune_module": impl.tune.__name__},
                         f"{what}: params (the config, flattened, as strings)", setting)
        tags = run.data.tags
        assertions.equal((tags.get("suite"), tags.get("trial_name", "").endswith(
            trial_ids[x]), run.info.run_name == tags.get("trial_name")), ("trainspec", True, True),
            f"{what}: (tag suite, tag trial_name ends with the trial id, run name == "
            "trial_name)", setting)
        history = client.get_metric_history(run.info.run_id, "step")
        assertions.equal([(m.step, m.value) for m in history],
                         [(1, 0.0)] if failed else [(1, 0.0), (2, 1.0)],
                         f"{what}: metric history of 'step' ((MLflow step = "
                         "training_iteration, value))", setting)
        metrics = set(run.data.metrics)
        assertions.equal(({"x", "training_iteration", "time_total_s", "done",
                           "config/x"} <= metrics, "config/journal" in metrics),
                         (True, False), f"{what}: metrics (every value float() takes, the "
                         f"config's among them; not strings) {sorted(metrics)}", setting)
        assertions.equal(run.info.status, "FAILED" if failed else "FINISHED",
                         f"{what}: status", setting)


#: what W&B's run has of a trial, as Ray 2.60 leaves it (seen there): the config with the
#: trial's identity keys (W&B adds `_wandb`), and history rows of a result's numbers, the
#: identity keys and `done` left out (`_runtime`, `_step`, `_timestamp` are W&B's)
WANDB_CONFIG = {"x", "journal", "tune_module", "trial_id", "trial_log_path", "date",
                "hostname", "node_ip", "pid", "_wandb"}
WANDB_HISTORY = {"x", "step", "training_iteration", "iterations_since_restore",
                 "time_this_iter_s", "time_total_s", "time_since_restore", "timestamp",
                 "_runtime", "_step", "_timestamp"}


@clause("tune.wandb-logger")
def check_wandb_logger_callback(impl):
    pytest.importorskip("wandb")
    grid, setting, _, experiment, journal = _tracked(impl)
    runs = wandb_runs.runs(experiment)
    results = {os.path.basename(r.path): r for r in grid}
    assertions.equal(sorted(runs), sorted(results), "trial folders with an offline W&B run",
                     setting)
    for folder, run in sorted(runs.items()):
        result = results[folder]
        trial_id, x = result.metrics["trial_id"], result.config["x"]
        what = f"the W&B run of x={x}"
        assertions.equal(run["run"], {"id": trial_id, "name": f"error_trial_{trial_id}",
                                      "group": "g", "project": "conformance"},
                         f"{what}: (id, name, group, project)", setting)
        config = run["config"]
        assertions.equal(set(config), WANDB_CONFIG, f"{what}: its config's keys", setting)
        assertions.equal([config[k] for k in ("x", "journal", "tune_module", "trial_id")],
                         [x, journal, impl.tune.__name__, trial_id],
                         f"{what}: config x, journal, tune_module, trial_id", setting)
        rows = run["history"]
        assertions.equal([set(row) for row in rows], [WANDB_HISTORY] * len(rows),
                         f"{what}: each history row's keys", setting)
        assertions.equal([(r["_step"], r["training_iteration"], r["step"]) for r in rows],
                         [(1, 1, 0)] if x == FAIL_X else [(1, 1, 0), (2, 2, 1)],
                         f"{what}: history (W&B step, training_iteration, step) per result",
                         setting)
