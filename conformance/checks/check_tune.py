"""Ray Tune: Tuner, trials, results, schedulers and Train inside Tune (clauses `tune.*`).

The trainables are in `conformance.tune_probe` (see there); every Tuner runs through the
adapter's `fit` (a deadline, a fresh session after a hang), one trial per CPU. Shared runs:

- "main": `trial` over {x: grid [1, 2, 3, 4], u: uniform(-1, 1), nested: {c: choice, r:
  randint(0, 5)}}, num_samples=2 (8 trials), TuneConfig(metric="score", mode="min"); each
  trial reports REPORTS times with checkpoints at CHECKPOINT_STEPS;
- "errors": `error_trial` over x in [0, 1, 2]; x=1 raises after its first report (once: the
  "restore" run re-runs it with Tuner.restore(resume_errored=True) and it succeeds);
- "stop" / "stop-fn": `stop_trial` (2 trials) with stop={"training_iteration": 3} / a stop
  callable that says stop at step 1;
- "asha": `asha_trial` over x in [3, 1, 4, 2] (loss = x), ASHA(max_t=4, grace_period=1,
  reduction_factor=2), max_concurrent_trials=1;
- "retry-1" / "retry-0": `retry_trial` exits once after its second checkpointed report,
  FailureConfig(max_failures=1 / 0);
- "params": with_resources(with_parameters(params_trial, data=DATA), {"cpu": 2});
- "interop": `driver_trial` fits a 2-worker TorchTrainer with TuneReportCallback;
- "config-errors": three Tuners whose fit() must raise, fitted in one adapter call.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import assertions, tune_probe
from conformance.adapters.base import NodeSpec
from conformance.catalogue import clause
from conformance.probe import Journal
from conformance.scenarios import shared, workspace
from conformance.tune_probe import CHECKPOINT_STEPS, REPORTS, SCORES

GRID = [1, 2, 3, 4]
SAMPLES = 2
CHOICES = ["a", "b", "c"]
INTEROP_CPUS = 4
ASHA = {"x": [3, 1, 4, 2], "max_t": 4, "grace_period": 1, "reduction_factor": 2}
#: the keys every result of a function trainable carries besides the user's metrics
AUTO_KEYS = ["checkpoint_dir_name", "config", "date", "done", "experiment_tag", "hostname",
             "iterations_since_restore", "node_ip", "pid", "time_since_restore",
             "time_this_iter_s", "time_total_s", "timestamp", "training_iteration", "trial_id"]
#: scope -> mode -> the x of get_best_result("score", mode, scope) on the main run
BEST = {"last": {"min": 1, "max": 2}, "all": {"min": 2, "max": 4},
        "avg": {"min": 3, "max": 1}, "last-5-avg": {"min": 4, "max": 2},
        "last-10-avg": {"min": 3, "max": 1}}
IMPROPER = "Improper 'run' - not string nor trainable."
NO_TRAINABLE = "You need to provide a trainable to tune."
NOT_RUN = ("Can't return results as experiment has not been run, yet. Call `Tuner.fit()` to "
           "run the experiment first.")
NO_METRIC = ("No {0} is provided. Either pass in a `{0}` arg to `get_best_result` or specify "
             "a {0} in the `TuneConfig` of your `Tuner`.")
NO_BEST = ("No best trial found for the given metric: {}. This means that no trial has "
           "reported this metric, or all values reported for this metric are NaN.")
BAD_MODE = "The `mode` parameter passed to `Tuner(...)` must be one of ['min', 'max']"
SCHEDULER_METRIC = ("You passed a `metric` or `mode` argument to `Tuner(...)`, but the "
                    "scheduler you are using was already instantiated with their own `metric` "
                    "and `mode` parameters.")
SCHEDULER_NO_METRIC = "instantiated without a valid `metric` (None) or `mode` (None) parameter"
FAIL_FAST = "max_failures must be 0 if fail_fast=True."
OUTSIDE_TUNE = "TuneReportCallback must be used in a Tune session."


@dataclasses.dataclass
class TuneRun:
    grid: object
    journal: Journal
    folder: str
    storage: str
    name: str
    setting: str

    def starts(self) -> dict:
        """trial id -> its start events, in order."""
        out: dict = {}
        for e in self.journal.events("start"):
            out.setdefault(e["trial_id"], []).append(e)
        return out


def _folder() -> tuple[str, str]:
    folder = workspace("trainspec-tune-")
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    return folder, journal


def _fit(impl, name: str, trainable, setting: str, space=None, tune_config=None,
         run_config=None, deadline_s: float = 120.0, folder=None) -> TuneRun:
    folder, journal = folder or _folder()
    storage = os.path.join(folder, "s")
    factory = tune_probe.TunerFactory(
        impl.tune.__name__, trainable,
        {"tune_module": impl.tune.__name__, "journal": journal, **(space or {})},
        tune_config or {}, {"name": name, "storage_path": storage, **(run_config or {})})
    setting = f"{impl.name}: {setting}"
    outcome = impl.fit(factory, max(impl.fit_deadline_s, deadline_s))
    grid = assertions.succeeded(outcome, setting)
    return TuneRun(grid, Journal(journal), folder, storage, name, setting)


def _main_run(impl) -> TuneRun:
    def build(impl):
        tune = impl.tune
        return _fit(impl, "tune-main", tune_probe.trial,
                    f"Tuner(tune_probe.trial, param_space={{x: grid_search({GRID}), u: "
                    f"uniform(-1, 1), nested: {{c: choice({CHOICES}), r: randint(0, 5)}}}}, "
                    f"TuneConfig(num_samples={SAMPLES}, metric='score', mode='min'))",
                    space={"x": tune.grid_search(GRID), "u": tune.uniform(-1, 1),
                           "nested": {"c": tune.choice(CHOICES), "r": tune.randint(0, 5)}},
                    tune_config={"num_samples": SAMPLES, "metric": "score", "mode": "min"})

    return shared(impl, "tune-main", build)


def _errors_run(impl) -> TuneRun:
    def build(impl):
        return _fit(impl, "tune-errors", tune_probe.error_trial,
                    "Tuner(tune_probe.error_trial, param_space={x: grid_search([0, 1, 2])}); "
                    f"x={tune_probe.FAIL_X} raises ValueError after its first report",
                    space={"x": impl.tune.grid_search([0, 1, 2])})

    return shared(impl, "tune-errors", build)


def _stop_run(impl, key: str) -> TuneRun:
    def build(impl):
        folder, journal = _folder()
        if key == "stop":
            stop, what = {"training_iteration": 3}, "{'training_iteration': 3}"
        else:
            stop, what = tune_probe.StopAfter(journal, 1), "StopAfter(step=1) (a callable)"
        return _fit(impl, f"tune-{key}", tune_probe.stop_trial,
                    f"Tuner(tune_probe.stop_trial (reports {REPORTS} times), param_space="
                    f"{{x: grid_search([1, 2])}}, RunConfig(stop={what}))",
                    space={"x": impl.tune.grid_search([1, 2])}, run_config={"stop": stop},
                    folder=(folder, journal))

    return shared(impl, f"tune-{key}", build)


def _asha_run(impl) -> TuneRun:
    def build(impl):
        schedulers = importlib.import_module(f"{impl.tune.__name__}.schedulers")
        asha = schedulers.ASHAScheduler(
            metric="loss", mode="min", max_t=ASHA["max_t"], grace_period=ASHA["grace_period"],
            reduction_factor=ASHA["reduction_factor"])
        return _fit(impl, "tune-asha", tune_probe.asha_trial,
                    f"Tuner(tune_probe.asha_trial (loss = x, {REPORTS} reports), param_space="
                    f"{{x: grid_search({ASHA['x']})}}, TuneConfig(scheduler=ASHAScheduler("
                    f"metric='loss', mode='min', max_t={ASHA['max_t']}, grace_period="
                    f"{ASHA['grace_period']}, reduction_factor={ASHA['reduction_factor']}), "
                    "max_concurrent_trials=1))",
                    space={"x": impl.tune.grid_search(ASHA["x"])},
                    tune_config={"scheduler": asha, "max_concurrent_trials": 1})

    return shared(impl, "tune-asha", build)


def _retry_run(impl, max_failures: int) -> TuneRun:
    def build(impl):
        tune = impl.tune
        return _fit(impl, f"tune-retry-{max_failures}", tune_probe.retry_trial,
                    f"Tuner(tune_probe.retry_trial, RunConfig(failure_config=FailureConfig("
                    f"max_failures={max_failures}))); the trial calls os._exit(1) once after "
                    f"its checkpointed report of step {tune_probe.RETRY_EXIT_AFTER}",
                    run_config={"failure_config": tune.FailureConfig(max_failures=max_failures)})

    return shared(impl, f"tune-retry-{max_failures}", build)


def _params_run(impl) -> TuneRun:
    def build(impl):
        tune = impl.tune
        trainable = tune.with_resources(
            tune.with_parameters(tune_probe.params_trial, data=tune_probe.DATA), {"cpu": 2})
        return _fit(impl, "tune-params", trainable,
                    "Tuner(with_resources(with_parameters(tune_probe.params_trial, data=DATA), "
                    "{'cpu': 2}))")

    return shared(impl, "tune-params", build)


def _interop_run(impl) -> TuneRun:
    """On a one-node cluster of INTEROP_CPUS CPUs: the trial takes 1 and its Train workers
    2 (the Train controller none); with fewer, Ray's worker group waits forever."""

    def build(impl):
        pytest.importorskip("torch")
        folder, journal = _folder()
        with impl.cluster([NodeSpec(cpus=INTEROP_CPUS)]):
            return _fit(impl, "tune-interop", tune_probe.driver_trial,
                        f"one node of {INTEROP_CPUS} CPUs; Tuner(tune_probe.driver_trial): one "
                        "trial fitting TorchTrainer(num_workers=2, RunConfig(name="
                        "'train-trial_id=<id>', callbacks=[TuneReportCallback()]))",
                        space={"train_module": impl.train.__name__,
                               "storage": os.path.join(folder, "train")},
                        deadline_s=240.0, folder=(folder, journal))

    return shared(impl, "tune-interop", build)


# ------------------------------------------------------------------------ helpers
def _raises(fn, exc_type, message: str, what: str, setting: str, exact: bool = True):
    __tracebackhide__ = True
    try:
        fn()
    except exc_type as exc:
        _message(exc, message, what, setting, exact)
        return exc
    except Exception as exc:  # noqa: BLE001 - the wrong outcome, reported
        raise AssertionError(f"{what} raised {type(exc).__name__}({exc}), expected "
                             f"{exc_type.__name__} [{setting}]") from exc
    raise AssertionError(f"{what} returned, expected {exc_type.__name__}({message!r}) "
                         f"[{setting}]")


def _message(exc: BaseException, message: str, what: str, setting: str, exact: bool = True):
    __tracebackhide__ = True
    seen = str(exc)
    ok = seen == message if exact else message in seen
    if not ok:
        raise AssertionError(f"{what} raised {type(exc).__name__}({seen!r}), expected the "
                             f"message {'' if exact else 'to contain '}{message!r} [{setting}]")


def _cell(value):
    """A dataframe cell, NaN (a missing key) as None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _column(frame, name: str) -> list:
    if name not in frame.columns:
        return [None] * len(frame)
    return [_cell(v) for v in frame[name].tolist()]


def _read_step(checkpoint) -> tuple[list, int]:
    with checkpoint.as_directory() as d:
        with open(os.path.join(d, "step.txt")) as f:
            return sorted(os.listdir(d)), int(f.read())


def _asha_iterations(losses: list, max_t: int, grace: int, rf: int) -> list:
    """The iterations each trial runs under ASHA (mode min) when the trials run one at a
    time in this order: at each rung a trial is stopped when its reward (-loss) is below
    the (1 - 1/rf) percentile of the rewards earlier trials recorded at that rung."""
    import numpy as np

    rungs, r = [], grace
    while r < max_t:
        rungs.append(r)
        r *= rf
    recorded: dict = {m: [] for m in rungs}
    out = []
    for loss in losses:
        stop = max_t
        for m in rungs:
            earlier = list(recorded[m])
            recorded[m].append(-loss)
            if earlier and -loss < float(np.percentile(earlier, (1 - 1 / rf) * 100)):
                stop = m
                break
        out.append(stop)
    return out


# ------------------------------------------------------------------------ no fit
@clause("tune.trainer-rejected")
def check_trainer_rejected(impl):
    pytest.importorskip("torch")
    tune, t = impl.tune, impl.train
    trainer = impl.framework("torch").TorchTrainer(
        tune_probe.stop_trial, scaling_config=t.ScalingConfig(num_workers=1))
    _raises(lambda: tune.Tuner(trainer), tune.TuneError, IMPROPER,
            "Tuner(TorchTrainer(fn))", impl.name)
    for falsy in (None, 0, ""):
        _raises(lambda falsy=falsy: tune.Tuner(falsy), tune.TuneError, NO_TRAINABLE,
                f"Tuner({falsy!r})", impl.name)
    tuner = tune.Tuner(tune_probe.stop_trial)
    _raises(tuner.get_results, RuntimeError, NOT_RUN, "Tuner(fn).get_results() before fit()",
            impl.name)


# ------------------------------------------------------------------------ main run
@clause("tune.report")
def check_report(impl):
    params = inspect.signature(impl.tune.report).parameters
    assertions.equal([(k, p.kind.name, p.default) for k, p in params.items()],
                     [("metrics", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
                      ("checkpoint", "KEYWORD_ONLY", None)],
                     "tune.report parameters (name, kind, default)", impl.name)
    run = _main_run(impl)
    starts = run.starts()
    for r in run.grid:
        m, x = r.metrics, r.config["x"]
        what = f"trial {m.get('trial_id')} (x={x})"
        assertions.equal(sorted(m), sorted(AUTO_KEYS + ["score", "step"]),
                         f"{what}: keys of Result.metrics", run.setting)
        assertions.equal((m["score"], m["step"], m["training_iteration"],
                          m["iterations_since_restore"], m["done"], m["checkpoint_dir_name"]),
                         (SCORES[x][-1], REPORTS - 1, REPORTS, REPORTS, True, None),
                         f"{what}: Result.metrics (score, step, training_iteration, "
                         "iterations_since_restore, done, checkpoint_dir_name)", run.setting)
        assertions.equal(m["config"], r.config, f"{what}: metrics['config'] == Result.config",
                         run.setting)
        assertions.equal(m["pid"], starts[m["trial_id"]][0]["pid"],
                         f"{what}: metrics['pid'] (the trial's process)", run.setting)
        gap = abs(m["time_total_s"] - m["time_since_restore"])
        assertions.equal(gap < 0.5, True, f"{what}: time_total_s ({m['time_total_s']!r}) "
                         f"within 0.5 s of time_since_restore ({m['time_since_restore']!r}) on "
                         "a first start (both sum the time between results)", run.setting)
        assertions.equal(isinstance(m["time_total_s"], float) and m["time_total_s"] >= 0, True,
                         f"{what}: time_total_s is a float >= 0 (seen {m['time_total_s']!r})",
                         run.setting)
        frame = r.metrics_dataframe
        assertions.equal((_column(frame, "training_iteration"), _column(frame, "step"),
                          _column(frame, "score")),
                         (list(range(1, REPORTS + 1)), list(range(REPORTS)), SCORES[x]),
                         f"{what}: metrics_dataframe (training_iteration, step, score)",
                         run.setting)


@clause("tune.trials")
def check_trials(impl):
    run = _main_run(impl)
    grid, starts = list(run.grid), run.starts()
    assertions.equal(len(grid), SAMPLES * len(GRID), "number of trials (num_samples x grid)",
                     run.setting)
    indexes = [int(r.metrics["trial_id"].rpartition("_")[2]) for r in grid]
    assertions.equal(sorted(indexes), list(range(len(grid))), "trial indexes", run.setting)
    by_index = dict(zip(indexes, grid, strict=True))
    assertions.equal([by_index[i].config["x"] for i in range(len(grid))], GRID * SAMPLES,
                     "x of the trials in creation order (the grid once per sample)",
                     run.setting)
    for r in grid:
        c = r.config
        what = f"trial {r.metrics['trial_id']}: Result.config {c}"
        assertions.equal(sorted(c), ["journal", "nested", "tune_module", "u", "x"],
                         f"{what}: keys", run.setting)
        assertions.equal((c["tune_module"], c["journal"]),
                         (impl.tune.__name__, run.journal.folder), f"{what}: constants",
                         run.setting)
        assertions.equal(isinstance(c["u"], float) and -1 <= c["u"] <= 1, True,
                         f"{what}: u from uniform(-1, 1) is a float in [-1, 1]", run.setting)
        assertions.equal(sorted(c["nested"]), ["c", "r"], f"{what}: nested keys", run.setting)
        assertions.equal(c["nested"]["c"] in CHOICES, True, f"{what}: nested.c in {CHOICES}",
                         run.setting)
        r_value = c["nested"]["r"]
        assertions.equal(isinstance(r_value, int) and 0 <= r_value < 5, True,
                         f"{what}: nested.r from randint(0, 5) is an int in [0, 5)", run.setting)
        (start,) = starts[r.metrics["trial_id"]]
        assertions.equal(start["config"], tune_probe.searched(c),
                         f"{what}: the config the function got (searched part)", run.setting)
    assertions.equal(len({r.config["u"] for r in grid}), len(grid),
                     "distinct values of u (drawn per trial)", run.setting)


@clause("tune.result-grid")
def check_result_grid(impl):
    run = _main_run(impl)
    grid = run.grid
    n = SAMPLES * len(GRID)
    listed = list(grid)
    assertions.equal((len(grid), [grid[i] for i in range(n)] == listed), (n, True),
                     "(len(grid), [grid[i] for i in range(len)] == list(grid))", run.setting)
    assertions.equal([r.metrics["trial_id"].rpartition("_")[2] for r in listed],
                     [f"{i:05d}" for i in range(n)],
                     "trial indexes of the grid's Results, in order", run.setting)
    assertions.equal((grid.num_terminated, grid.num_errors, list(grid.errors)), (n, 0, []),
                     "(num_terminated, num_errors, errors)", run.setting)
    assertions.equal(grid.get_best_result().config["x"], 1,
                     "x of get_best_result() (TuneConfig's metric='score', mode='min', scope "
                     "'last')", run.setting)
    for scope, modes in BEST.items():
        for mode, x in modes.items():
            best = grid.get_best_result("score", mode, scope)
            assertions.equal(best.config["x"], x,
                             f"x of get_best_result('score', {mode!r}, {scope!r})", run.setting)
    _raises(lambda: grid.get_best_result("nope", "min"), RuntimeError, NO_BEST.format("nope"),
            "get_best_result('nope', 'min')", run.setting, exact=False)
    _raises(lambda: grid.get_best_result("score", "min", "bad"), ValueError, "bad",
            "get_best_result('score', 'min', scope='bad')", run.setting, exact=False)
    frame = grid.get_dataframe()
    assertions.equal(len(frame), n, "rows of get_dataframe()", run.setting)
    rows = {row["trial_id"]: row for row in frame.to_dict("records")}
    assertions.equal(sorted(rows), sorted(r.metrics["trial_id"] for r in listed),
                     "trial_id column of get_dataframe()", run.setting)
    best = {row["trial_id"]: _cell(row["score"]) for row in
            grid.get_dataframe(filter_metric="score", filter_mode="min").to_dict("records")}
    experiment = os.path.join(run.storage, run.name)
    for r in listed:
        tid, c = r.metrics["trial_id"], r.config
        row = {k: _cell(v) for k, v in rows[tid].items()}
        assertions.equal(
            (row.get("config/x"), row.get("config/u"), row.get("config/nested/c"),
             row.get("config/nested/r"), row.get("score"), row.get("step")),
            (c["x"], c["u"], c["nested"]["c"], c["nested"]["r"], SCORES[c["x"]][-1],
             REPORTS - 1),
            f"trial {tid}: get_dataframe() row (config/x, config/u, config/nested/c, "
            "config/nested/r, score, step)", run.setting)
        assertions.equal(best.get(tid), min(SCORES[c["x"]]),
                         f"trial {tid}: score in get_dataframe(filter_metric='score', "
                         "filter_mode='min')", run.setting)
        assertions.equal((os.path.isdir(r.path), os.path.dirname(r.path)), (True, experiment),
                         f"trial {tid}: (Result.path is a folder, its parent)", run.setting)
    assertions.equal(len({r.path for r in listed}), n, "distinct Result.path values",
                     run.setting)


@clause("tune.result-grid")
def check_best_result_errors(impl):
    run = _errors_run(impl)
    grid = run.grid
    for missing, call in (("metric", lambda: grid.get_best_result()),
                          ("mode", lambda: grid.get_best_result("x"))):
        _raises(call, ValueError, NO_METRIC.format(missing),
                f"get_best_result({'' if missing == 'metric' else repr('x')}) with no "
                f"{missing} in TuneConfig", run.setting)
    assertions.equal(grid.get_best_result("x", "max").config["x"], 2,
                     "x of get_best_result('x', 'max')", run.setting)
    single = _params_run(impl)
    assertions.equal(len(single.grid), 1, "trials of the params run", single.setting)
    assertions.equal(single.grid.get_best_result().path, single.grid[0].path,
                     "get_best_result() of a one-trial grid (no metric anywhere)",
                     single.setting)


@clause("tune.checkpoint")
def check_checkpoint(impl):
    run = _main_run(impl)
    starts = run.starts()
    names = {s: f"checkpoint_{k:06d}" for k, s in enumerate(CHECKPOINT_STEPS)}
    for r in run.grid:
        tid = r.metrics["trial_id"]
        assertions.equal([e["checkpoint"] for e in starts[tid]], [None],
                         f"trial {tid}: get_checkpoint() at its (first) start", run.setting)
        assertions.equal(_column(r.metrics_dataframe, "checkpoint_dir_name"),
                         [names.get(s) for s in range(REPORTS)],
                         f"trial {tid}: checkpoint_dir_name of each result", run.setting)
        assertions.equal(r.checkpoint is not None, True, f"trial {tid}: Result.checkpoint is "
                         "not None", run.setting)
        last = names[CHECKPOINT_STEPS[-1]]
        assertions.equal(os.path.normpath(r.checkpoint.path),
                         os.path.normpath(os.path.join(r.path, last)),
                         f"trial {tid}: Result.checkpoint.path", run.setting)
        assertions.equal(_read_step(r.checkpoint), (["step.txt"], CHECKPOINT_STEPS[-1]),
                         f"trial {tid}: (files, step.txt) of Result.checkpoint", run.setting)
        for name in names.values():
            assertions.equal(os.path.isdir(os.path.join(r.path, name)), True,
                             f"trial {tid}: {name} is a folder of the trial dir", run.setting)


@clause("tune.context")
def check_context(impl):
    run = _main_run(impl)
    starts = run.starts()
    ids = sorted(starts)
    assertions.equal(ids, sorted(r.metrics["trial_id"] for r in run.grid),
                     "get_trial_id() of the trials == the results' trial_id", run.setting)
    shape = [re.fullmatch(r"(.+)_(\d{5})", i) for i in ids]
    assertions.equal(all(shape) and len({m.group(1) for m in shape}) == 1, True,
                     f"trial ids '<run id>_<5-digit index>' with one run id (seen {ids})",
                     run.setting)
    for r in run.grid:
        tid = r.metrics["trial_id"]
        (e,) = starts[tid]
        base = os.path.basename(r.path)
        assertions.equal((e["trial_name"], e["experiment_name"]), (f"trial_{tid}", run.name),
                         f"trial {tid}: (get_trial_name(), get_experiment_name())", run.setting)
        assertions.equal((os.path.basename(e["trial_dir"]), base.startswith(e["trial_name"] + "_")),
                         (base, True), f"trial {tid}: (last component of get_trial_dir(), "
                         f"Result.path's last component {base!r} starts with the trial name)",
                         run.setting)


# ------------------------------------------------------------------------ errors and restore
@clause("tune.trial-error")
def check_trial_error(impl):
    run = _errors_run(impl)
    grid = run.grid
    assertions.equal((len(grid), grid.num_terminated, grid.num_errors), (3, 2, 1),
                     "(len, num_terminated, num_errors)", run.setting)
    (error,) = grid.errors
    assertions.equal(isinstance(error, ValueError), True,
                     f"ResultGrid.errors[0] is a ValueError (seen {type(error).__mro__})",
                     run.setting)
    _message(error, tune_probe.FAIL_MESSAGE, "the trial", run.setting, exact=False)
    for r in grid:
        x = r.config["x"]
        if x == tune_probe.FAIL_X:
            assertions.equal(str(r.error), str(error), f"x={x}: str(Result.error) == "
                             "str(errors[0])", run.setting)
            assertions.equal((r.metrics["training_iteration"], r.metrics["step"]), (1, 0),
                             f"x={x}: (training_iteration, step) of its last result (the "
                             "report before the raise)", run.setting)
        else:
            assertions.equal((r.error, r.metrics["training_iteration"]), (None, 2),
                             f"x={x}: (Result.error, training_iteration)", run.setting)


@clause("tune.restore")
def check_restore(impl):
    tune = impl.tune
    first = _errors_run(impl)
    path = first.grid.experiment_path
    setting = first.setting + "; then Tuner.restore(path, error_trial, resume_errored=True)"
    assertions.equal([tune.Tuner.can_restore(p) for p in
                      (path, first.folder, os.path.join(first.folder, "nope"))],
                     [True, False, False],
                     "Tuner.can_restore of (the experiment folder, a folder that is not one, "
                     "a missing path)", setting)

    def build(impl):
        before = {k: len(v) for k, v in first.starts().items()}
        outcome = impl.fit(tune_probe.RestoreFactory(tune.__name__, path, tune_probe.error_trial,
                                                     {"resume_errored": True}),
                           max(impl.fit_deadline_s, 120.0))
        return assertions.succeeded(outcome, setting), before

    grid, before = shared(impl, "tune-restore", build)
    after = {k: len(v) for k, v in first.starts().items()}
    ids = {r.config["x"]: r.metrics["trial_id"] for r in first.grid}
    assertions.equal({x: after[i] - before[i] for x, i in ids.items()},
                     {0: 0, 1: 1, 2: 0}, "x -> starts of the trial during the restored fit",
                     setting)
    assertions.equal((len(grid), grid.num_errors, grid.experiment_path), (3, 0, path),
                     "restored grid: (len, num_errors, experiment_path)", setting)
    seen = {r.metrics["trial_id"]: (r.error, r.metrics["step"]) for r in grid}
    assertions.equal(seen, {i: (None, 1) for i in ids.values()},
                     "restored grid: trial id -> (Result.error, last step)", setting)


# ------------------------------------------------------------------------ failures
@clause("tune.trial-retry")
def check_trial_retry(impl):
    run = _retry_run(impl, 1)
    grid = run.grid
    assertions.equal((len(grid), grid.num_errors, grid[0].error), (1, 0, None),
                     "(len, num_errors, Result.error)", run.setting)
    starts = run.journal.events("start")
    exits = run.journal.events("exit")
    assertions.equal([e["checkpoint"] for e in starts], [None, tune_probe.RETRY_EXIT_AFTER],
                     "step of get_checkpoint() at each start of the trial", run.setting)
    assertions.equal((len(exits), exits and exits[0]["pid"] == starts[0]["pid"],
                      starts[0]["pid"] != starts[1]["pid"]), (1, True, True),
                     "(exits, the first process exited, the restart is a new process)",
                     run.setting)
    r = grid[0]
    frame = r.metrics_dataframe
    steps = tune_probe.RETRY_STEPS
    assertions.equal((_column(frame, "step"), _column(frame, "training_iteration")),
                     (list(range(steps)), list(range(1, steps + 1))),
                     "metrics_dataframe (step, training_iteration): the restart goes on from "
                     "the checkpoint's iteration", run.setting)
    assertions.equal(_read_step(r.checkpoint)[1], steps - 1, "step.txt of Result.checkpoint",
                     run.setting)
    dead = _retry_run(impl, 0)
    grid = dead.grid
    assertions.equal((len(grid), grid.num_errors, grid[0].error is not None), (1, 1, True),
                     "(len, num_errors, Result.error is not None)", dead.setting)
    assertions.equal((len(dead.journal.events("start")), grid[0].metrics["training_iteration"],
                      grid[0].metrics["step"]), (1, 2, tune_probe.RETRY_EXIT_AFTER),
                     "(starts, training_iteration, step of the last result)", dead.setting)


@clause("tune.config-errors")
def check_config_errors(impl):
    tune = impl.tune
    _raises(lambda: tune.FailureConfig(fail_fast=True, max_failures=1), ValueError, FAIL_FAST,
            "FailureConfig(fail_fast=True, max_failures=1)", impl.name)
    schedulers = importlib.import_module(f"{tune.__name__}.schedulers")
    cases = [
        ("TuneConfig(mode='bad', metric='step')", {"mode": "bad", "metric": "step"}, BAD_MODE,
         True),
        ("TuneConfig(metric='step', mode='min', scheduler=ASHAScheduler(metric='loss', "
         "mode='min'))", {"metric": "step", "mode": "min",
                          "scheduler": schedulers.ASHAScheduler(metric="loss", mode="min")},
         SCHEDULER_METRIC, False),
        ("TuneConfig(scheduler=ASHAScheduler())", {"scheduler": schedulers.ASHAScheduler()},
         SCHEDULER_NO_METRIC, False),
    ]
    folder = workspace("trainspec-tune-")
    journals, factories = [], []
    for i, (_, config, _, _) in enumerate(cases):
        journal = os.path.join(folder, f"journal-{i}")
        os.makedirs(journal)
        journals.append(journal)
        factories.append(tune_probe.TunerFactory(
            tune.__name__, tune_probe.stop_trial,
            {"tune_module": tune.__name__, "journal": journal}, config,
            {"name": f"bad-{i}", "storage_path": os.path.join(folder, "s")}))
    setting = f"{impl.name}: Tuner(tune_probe.stop_trial, tune_config=...).fit()"
    outcome = impl.fit(tune_probe.FitEach(factories), max(impl.fit_deadline_s, 120.0))
    seen = assertions.succeeded(outcome, setting)
    for (what, _, message, exact), (stage, value), journal in zip(cases, seen, journals,
                                                                  strict=True):
        assertions.equal((stage, type(value).__name__), ("fit", "ValueError"),
                         f"{what}: (where it raised: 'built' or 'fit', exception type; seen "
                         f"{value!r})", setting)
        _message(value, message, f"{what}: Tuner.fit()", setting, exact)
        assertions.equal(Journal(journal).events("start"), [],
                         f"{what}: trials started before fit() raised", setting)


# ------------------------------------------------------------------------ stopping
@clause("tune.stop")
def check_stop_dict(impl):
    run = _stop_run(impl, "stop")
    assertions.equal((len(run.grid), run.grid.num_terminated, run.grid.num_errors), (2, 2, 0),
                     "(len, num_terminated, num_errors)", run.setting)
    for r in run.grid:
        tid = r.metrics["trial_id"]
        assertions.equal((r.metrics["training_iteration"], r.metrics["step"], r.metrics["done"],
                          len(r.metrics_dataframe)), (3, 2, True, 3),
                         f"trial {tid}: (training_iteration, step, done, results)", run.setting)
        entered = [e["step"] for e in run.journal.events("report") if e["trial_id"] == tid]
        assertions.equal(max(entered), 2, f"trial {tid}: last step whose report() the "
                         "function entered (none after the stopping result)", run.setting)


@clause("tune.stop")
def check_stop_callable(impl):
    run = _stop_run(impl, "stop-fn")
    assertions.equal((len(run.grid), run.grid.num_terminated, run.grid.num_errors), (2, 2, 0),
                     "(len, num_terminated, num_errors)", run.setting)
    calls = run.journal.events("stop_call")
    for r in run.grid:
        tid = r.metrics["trial_id"]
        assertions.equal((r.metrics["training_iteration"], r.metrics["step"], r.metrics["done"]),
                         (2, 1, True), f"trial {tid}: (training_iteration, step, done)",
                         run.setting)
        mine = [(c["result_trial_id"], c["step"], c["iteration"]) for c in calls
                if c["trial_id"] == tid]
        assertions.equal(mine, [(tid, 0, 1), (tid, 1, 2)],
                         f"trial {tid}: stop(trial_id, result) calls (result['trial_id'], "
                         "step, training_iteration)", run.setting)
        entered = [e["step"] for e in run.journal.events("report") if e["trial_id"] == tid]
        assertions.equal(max(entered), 1, f"trial {tid}: last step whose report() the "
                         "function entered", run.setting)


@clause("tune.scheduler-stop")
def check_asha(impl):
    run = _asha_run(impl)
    grid = run.grid
    assertions.equal((len(grid), grid.num_terminated, grid.num_errors), (4, 4, 0),
                     "(len, num_terminated, num_errors)", run.setting)
    order = [e["config"]["x"] for e in sorted(run.journal.events("start"), key=lambda e: e["t"])]
    iterations = {r.config["x"]: r.metrics["training_iteration"] for r in grid}
    want = _asha_iterations(order, ASHA["max_t"], ASHA["grace_period"],
                            ASHA["reduction_factor"])
    assertions.equal(iterations, dict(zip(order, want, strict=True)),
                     f"x -> training_iteration of its last result (trials ran x={order})",
                     run.setting)
    assertions.equal((iterations[min(ASHA["x"])], min(iterations.values()) < ASHA["max_t"]),
                     (ASHA["max_t"], True),
                     "(iterations of the best trial, some trial stopped before max_t)",
                     run.setting)


@clause("tune.max-concurrent")
def check_max_concurrent(impl):
    run = _asha_run(impl)
    spans = {}
    for e in run.journal.events():
        if "trial_id" in e:
            first, last = spans.get(e["trial_id"], (e["t"], e["t"]))
            spans[e["trial_id"]] = (min(first, e["t"]), max(last, e["t"]))
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    assertions.equal([tid.rpartition("_")[2] for tid, _ in ordered],
                     [f"{i:05d}" for i in range(len(ASHA["x"]))],
                     "trial indexes in the order the trials started", run.setting)
    for (a, (_, a_end)), (b, (b_start, _)) in zip(ordered, ordered[1:], strict=False):
        assertions.equal(b_start > a_end, True,
                         f"trial {b} started ({b_start:.3f}) after trial {a}'s last report "
                         f"({a_end:.3f})", run.setting)


# ------------------------------------------------------------------------ trainable wrappers
@clause("tune.with-parameters")
def check_with_parameters(impl):
    run = _params_run(impl)
    (start,) = run.journal.events("start")
    assertions.equal(start["data"] == tune_probe.DATA, True,
                     "the `data` params_trial got equals the object given to with_parameters",
                     run.setting)
    assertions.equal((run.grid.num_errors, run.grid[0].metrics["training_iteration"]), (0, 1),
                     "(num_errors, training_iteration)", run.setting)


@clause("tune.with-resources")
def check_with_resources(impl):
    run = _params_run(impl)
    (start,) = run.journal.events("start")
    assertions.equal(start["resources"], {"type": "PlacementGroupFactory",
                                          "bundles": [{"CPU": 2.0}], "required": {"CPU": 2.0}},
                     "get_trial_resources() (type, bundles, required_resources)", run.setting)
    main = _main_run(impl)
    seen = {str(e["resources"]) for e in main.journal.events("start")}
    assertions.equal(seen, {str({"type": "PlacementGroupFactory", "bundles": [{"CPU": 1.0}],
                                 "required": {"CPU": 1.0}})},
                     "get_trial_resources() without with_resources", main.setting)


# ------------------------------------------------------------------------ Train inside Tune
@pytest.mark.cluster
@clause("tune.train-interop")
def check_train_interop(impl):
    """Runs on a one-node cluster of INTEROP_CPUS (4) logical CPUs (adapter.cluster); the run
    needs 3: the trial's 1 and 2 Train workers (the Train controller takes none)."""
    root = impl.tune.__name__.rpartition(".")[0]
    callback = importlib.import_module(f"{impl.tune.__name__}.integration.ray_train")
    assertions.equal(issubclass(callback.TuneReportCallback, impl.train.UserCallback), True,
                     f"{root}.tune.integration.ray_train.TuneReportCallback is a "
                     "train.UserCallback", impl.name)
    _raises(callback.TuneReportCallback, RuntimeError, OUTSIDE_TUNE,
            "TuneReportCallback() outside a Tune session", impl.name)
    run = _interop_run(impl)
    (start,) = run.journal.events("start")
    (end,) = run.journal.events("end")
    err = start["train_report"]
    assertions.equal(err is not None and "DeprecationWarning" in err["mro"], True,
                     f"train.report in a Tune function raises DeprecationWarning (seen {err})",
                     run.setting)
    text = err["message"].lower()
    assertions.equal(("report" in text, "deprecated" in text, "tune" in text),
                     (True, True, True), f"its message names report, 'deprecated' and tune "
                     f"({err['message']!r})", run.setting)
    grid = run.grid
    assertions.equal((len(grid), grid.num_errors, grid[0].checkpoint), (1, 0, None),
                     "(len, num_errors, the Tune trial's Result.checkpoint)", run.setting)
    r = grid[0]
    tid = r.metrics["trial_id"]
    steps = tune_probe.INTEROP_STEPS
    frame = r.metrics_dataframe
    assertions.equal((_column(frame, "step"), _column(frame, "rank"), _column(frame, "value"),
                      _column(frame, "training_iteration")),
                     (list(range(steps)), [0] * steps, list(range(steps)),
                      list(range(1, steps + 1))),
                     "Tune results (step, rank, value, training_iteration): one per Train "
                     "report, rank 0's metrics", run.setting)
    train_checkpoint = end["train_checkpoint"]
    assertions.equal(_column(frame, "checkpoint_path"),
                     [train_checkpoint if s == tune_probe.INTEROP_CHECKPOINT_STEP else None
                      for s in range(steps)],
                     "checkpoint_path of each Tune result (the Train checkpoint's path where "
                     "the Train report had one)", run.setting)
    assertions.equal(("checkpoint_path" in r.metrics, end["train_path"]),
                     (False, os.path.join(run.folder, "train", f"train-trial_id={tid}")),
                     "('checkpoint_path' in the last Tune result, the Train run's path)",
                     run.setting)
    ranks = sorted({(e["rank"], e["step"]) for e in run.journal.events("train_reported")})
    assertions.equal(ranks, [(rank, s) for rank in range(2) for s in range(steps)],
                     "(rank, step) of the Train reports that returned", run.setting)


# ------------------------------------------------------------------------ ASHA decisions
class _Trial:
    """What a scheduler reads of a trial: its id."""

    def __init__(self, trial_id: str):
        self.trial_id = trial_id


def asha_oracle(config: dict, events: list, seed: int) -> list:
    """The decisions of Ray's ASHA for `events` ("add", i) / ("result", i, t, value) /
    ("complete", i, t, value): "CONTINUE" or "STOP" for each result, None otherwise.

    Rungs of bracket s at grace_period * rf**(k + s) for k < int(log(max_t / grace) /
    log(rf) - s + 1); a trial joins bracket i with probability proportional to
    e**(rungs_i - most rungs), drawn by numpy's global random state (seeded with `seed`
    before the first "add"). A result at t >= max_t stops the trial (with
    stop_last_trials); otherwise, at the highest rung t reached where the trial is not
    recorded yet (unless, without stop_last_trials, it is recorded at a rung it reached),
    the signed value is compared with the (1 - 1/rf) quantile of the values recorded there
    (NaN ignored): below it, STOP; the value is recorded either way. A completion records
    the same way and decides nothing."""
    import numpy as np

    max_t, grace, rf = config["max_t"], config["grace_period"], config["reduction_factor"]
    sign = 1.0 if config["mode"] == "max" else -1.0
    stop_last = config["stop_last_trials"]
    brackets = []
    for s in range(config["brackets"]):
        count = int(np.log(max_t / grace) / np.log(rf) - s + 1)
        brackets.append([(grace * rf ** (k + s), {}) for k in reversed(range(count))])
    of = {}

    def record(rungs, trial, t, reward) -> str:
        for milestone, recorded in rungs:
            if t >= milestone and trial in recorded and not stop_last:
                return "CONTINUE"
            if t < milestone or trial in recorded:
                continue
            decision = "CONTINUE"
            if recorded and reward < np.nanpercentile(list(recorded.values()),
                                                      (1 - 1 / rf) * 100):
                decision = "STOP"
            recorded[trial] = reward
            return decision
        return "CONTINUE"

    np.random.seed(seed)
    out = []
    for event in events:
        if event[0] == "add":
            sizes = np.array([len(b) for b in brackets])
            weights = np.e ** (sizes - sizes.max())
            of[event[1]] = brackets[np.random.choice(len(brackets), p=weights / weights.sum())]
            out.append(None)
            continue
        _, trial, t, value = event
        if value is None:  # a result without the metric: nothing to judge or record
            out.append("CONTINUE" if event[0] == "result" else None)
            if event[0] == "complete":
                of.pop(trial)
            continue
        if event[0] == "complete":
            record(of.pop(trial), trial, t, sign * value)
            out.append(None)
        elif t >= max_t and stop_last:
            out.append("STOP")
        else:
            out.append(record(of[trial], trial, t, sign * value))
    return out


@st.composite
def _asha_cases(draw):
    grace = draw(st.integers(1, 4))
    config = {"max_t": draw(st.integers(grace, 24)), "grace_period": grace,
              "reduction_factor": draw(st.sampled_from([2, 3, 4, 1.5])),
              "brackets": draw(st.integers(1, 3)), "mode": draw(st.sampled_from(["min", "max"])),
              "stop_last_trials": draw(st.booleans())}
    trials = draw(st.integers(1, 6))
    values = st.one_of(st.integers(-5, 5).map(float), st.just(math.nan), st.none())
    lengths = [draw(st.integers(1, config["max_t"] + 1)) for _ in range(trials)]
    # each trial's time goes up by 1 to 3 a result (a jump may pass rungs); the trials'
    # results interleave; a value None is a result without the metric
    order = draw(st.permutations([i for i in range(trials) for _ in range(lengths[i])]))
    return config, lengths, [(i, draw(values), draw(st.integers(1, 3))) for i in order]


def _asha_events(config: dict, lengths: list, results: list, decide) -> tuple[list, list]:
    """Feed the results to `decide(event)` as Tune would: each trial is added before its
    first result, a stopped trial reports no more, a trial that ran all its results
    completes with its last one. Returns (events, decisions)."""
    events, decisions, count, clock, stopped = [], [], {}, {}, set()
    for trial, value, step in results:
        if trial in stopped:
            continue
        if trial not in count:
            events.append(("add", trial))
            decisions.append(decide(events[-1]))
        count[trial] = count.get(trial, 0) + 1
        clock[trial] = clock.get(trial, 0) + step
        events.append(("result", trial, clock[trial], value))
        decisions.append(decide(events[-1]))
        if decisions[-1] == "STOP":
            stopped.add(trial)
        elif count[trial] == lengths[trial]:
            events.append(("complete", trial, clock[trial], value))
            decisions.append(decide(events[-1]))
    return events, decisions


@clause("tune.asha-decisions")
@pytest.mark.filterwarnings("ignore:All-NaN slice encountered")
@given(case=_asha_cases(), seed=st.integers(0, 2**31 - 1))
def check_asha_decisions(impl, case, seed):
    import numpy as np

    config, lengths, results = case
    schedulers = importlib.import_module(f"{impl.tune.__name__}.schedulers")
    scheduler = schedulers.ASHAScheduler(metric="loss", **config)
    trials: dict = {}

    def decide(event):
        trial = trials.setdefault(event[1], _Trial(f"t{event[1]}"))
        if event[0] == "add":
            scheduler.on_trial_add(None, trial)
            return None
        result = {"training_iteration": event[2]}
        if event[3] is not None:
            result["loss"] = event[3]
        if event[0] == "complete":
            scheduler.on_trial_complete(None, trial, result)
            return None
        return str(scheduler.on_trial_result(None, trial, result))

    np.random.seed(seed)
    events, decisions = _asha_events(config, lengths, results, decide)
    expected = asha_oracle(config, events, seed)
    setting = (f"{impl.name}: ASHAScheduler(metric='loss', {config}), numpy seed {seed}, "
               f"events {events}")
    assertions.equal(decisions, expected, "the scheduler's decision for each event (None: "
                     "add or complete)", setting)


@clause("tune.outside-session")
def check_outside_a_trial_warns_once(impl):
    import subprocess
    import sys

    code = ("import importlib, warnings\n"
            f"tune = importlib.import_module({impl.tune.__name__!r})\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.simplefilter('always')\n"
            "    got = [tune.report({'a': 1}), tune.report({'a': 2}), tune.get_checkpoint(),\n"
            "           tune.get_checkpoint()]\n"
            "print(repr((got, [(w.category.__name__, str(w.message)) for w in seen])))\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=path), cwd=root)
    said = ("`{}` is meant to only be called inside a function that is executed by a Tuner "
            "or Trainer. Returning `None`.")
    assertions.equal(done.stdout.strip().splitlines()[-1:],
                     [repr(([None] * 4, [("UserWarning", said.format("report")),
                                         ("UserWarning", said.format("get_checkpoint"))]))],
                     "(what tune.report twice and tune.get_checkpoint twice returned outside a "
                     f"trial, the warnings given) (stderr: {done.stderr[-1500:]!r})", impl.name)


@clause("tune.asha-decisions")
def check_asha_arguments(impl):
    schedulers = importlib.import_module(f"{impl.tune.__name__}.schedulers")
    make = schedulers.ASHAScheduler
    assertions.equal({k: p.default for k, p in inspect.signature(make).parameters.items()},
                     {"time_attr": "training_iteration", "metric": None, "mode": None,
                      "max_t": 100, "grace_period": 1, "reduction_factor": 4, "brackets": 1,
                      "stop_last_trials": True}, "ASHAScheduler's parameters and defaults",
                     impl.name)
    for kwargs in ({"max_t": 0}, {"max_t": -1}, {"max_t": 3, "grace_period": 4},
                   {"grace_period": 0}, {"reduction_factor": 1}, {"reduction_factor": 0.5},
                   {"brackets": 0}, {"mode": "avg"}):
        with pytest.raises(AssertionError):
            make(metric="loss", **kwargs)
    # the boundaries allowed
    for kwargs in ({"max_t": 1, "grace_period": 1}, {"max_t": 3, "grace_period": 3},
                   {"reduction_factor": 1.01}, {"brackets": 1}, {"mode": "max"},
                   {"mode": None}):
        make(metric="loss", **kwargs)
