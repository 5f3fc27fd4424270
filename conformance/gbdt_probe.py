"""Training functions of the XGBoost and LightGBM checks (clauses `xgboost.*`, `lightgbm.*`).

Both train on a tiny synthetic regression set (numpy, fixed seeds), each rank on its shard
`X[rank::world_size]`, and journal what they saw: the framework's view of the group
(xgboost.collective's rank and size, LightGBM's network parameters), every `report()` the
implementation's RayTrainReportCallback made (the implementation's `report` is wrapped for
the duration of the function, with the files of the reported folder), the evaluation
history the framework kept, and the final booster (rounds, predictions on fixed rows).

`config["mode"]` picks the run: "main" (several `xgboost.train` phases, or one
`lightgbm.train`, under a 2-worker trainer), "local" (num_workers=0) or "resume" (one
rank is killed by the suite's fault mechanism after a round on the first attempt; every
attempt starts from `get_checkpoint()` with `xgb_model=` / `init_model=`).

The module imports without xgboost and lightgbm: they are imported inside the functions.
"""

from __future__ import annotations

import importlib
import os
import time

from conformance.probe import Fault, Journal, fire

DATA = {"rows": 200, "valid_rows": 60, "features": 4, "seed": 0}
#: rows whose predictions the journal keeps for each final booster
PROBE_ROWS = 8


def count_keys(metrics: dict) -> dict:
    """The results_postprocessing_fn of the "list" phase: adds the number of keys."""
    return {**metrics, "keys": len(metrics)}


#: the phases of the main XGBoost run, in order: (name, rounds, callback kwargs); "list"
#: and "dict" select and rename metrics, "main" checkpoints every 2 rounds
XGB_PHASES = (
    ("list", 2, {"metrics": ["valid-rmse", "train-mae"], "checkpoint_at_end": False,
                 "results_postprocessing_fn": count_keys}),
    ("dict", 2, {"metrics": {"loss": "valid-rmse", "fit": "train-mae"},
                 "filename": "model.json"}),
    # every third round: the last round is a checkpoint round, so no extra final report
    ("aligned", 6, {"frequency": 3}),
    ("main", 5, {"frequency": 2}),
)
XGB_PARAMS = {"objective": "reg:squarederror", "eval_metric": ["rmse", "mae"], "max_depth": 2,
              "eta": 0.3, "tree_method": "hist", "nthread": 1, "seed": 0}
LGB_ROUNDS = 7
LGB_FREQUENCY = 3
#: rounds of the lightgbm.cv run after the main training (metrics-only reports)
LGB_CV_ROUNDS = 2
LGB_PARAMS = {"objective": "regression", "metric": ["l2", "l1"], "num_leaves": 4,
              "min_data_in_leaf": 5, "learning_rate": 0.3, "num_threads": 1, "verbose": -1,
              "seed": 0, "deterministic": True}
RESUME = {"rounds": 4, "kill_after": 1}  # rank 1 dies after round 1 (0-based), attempt 0


def dataset(seed: int, rows: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, DATA["features"]))
    y = x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=rows)
    return x, y


def shards(rank: int, world: int):
    """(train X, train y, valid X, valid y) of one rank."""
    x, y = dataset(DATA["seed"], DATA["rows"])
    vx, vy = dataset(DATA["seed"] + 1, DATA["valid_rows"])
    return x[rank::world], y[rank::world], vx[rank::world], vy[rank::world]


def probe_rows():
    return dataset(DATA["seed"] + 2, PROBE_ROWS)[0]


def _listing(checkpoint) -> list | None:
    if checkpoint is None:
        return None
    path = checkpoint.path
    return sorted(os.listdir(path)) if os.path.isdir(path) else ["<gone>"]


class _Reports:
    """Wraps the implementation's `report` so each call is journaled with the phase."""

    def __init__(self, train, journal: Journal, rank: int, attempt: int):
        self.train, self.journal, self.rank, self.attempt = train, journal, rank, attempt
        self.phase = None
        self.original = train.report

    def __enter__(self):
        def journaled_report(*args, **kwargs):
            metrics = kwargs.get("metrics", args[0] if args else None)
            checkpoint = kwargs.get("checkpoint", args[1] if len(args) > 1 else None)
            self.journal.record(ev="gbdt_report", rank=self.rank, attempt=self.attempt,
                                phase=self.phase, metrics=metrics, files=_listing(checkpoint))
            return self.original(*args, **kwargs)

        self.train.report = journaled_report
        return self

    def __exit__(self, *exc):
        self.train.report = self.original


def _floats(values) -> list:
    return [float(v) for v in values]


def _history(evals_result: dict) -> dict:
    """{'<name>-<metric>': [value per round]} of an evaluation history."""
    return {f"{name}-{metric}": _floats(values) for name, metrics in evals_result.items()
            for metric, values in metrics.items()}


def _kill_due(config: dict, rank: int, attempt: int, round_: int) -> Fault | None:
    kill = config.get("kill")
    if kill and (kill["rank"], kill["attempt"], kill["round"]) == (rank, attempt, round_):
        return Fault(kill["kind"], rank, round_, attempt)
    return None


def _fire(journal: Journal, train, fault: Fault) -> None:
    # The fault strikes once the round's report (and rank 0's checkpoint) is registered
    # (get_all_reported_checkpoints() waits until every report in flight is processed), so
    # the restart must restore that round; without that function, a pause stands in.
    try:
        registered = len(train.get_all_reported_checkpoints())
    except Exception as exc:  # noqa: BLE001 - not what the checks judge
        registered = f"{type(exc).__name__}: {exc}"
        time.sleep(0.5)
    journal.record(ev="gbdt_kill", rank=fault.rank, attempt=fault.attempt,
                   round=fault.report, fault=str(fault), registered=registered)
    time.sleep(0.2)
    fire(fault)


# ------------------------------------------------------------------------ xgboost
def xgboost_probe(config: dict) -> None:
    import xgboost
    from xgboost import collective
    from xgboost.callback import TrainingCallback

    train = importlib.import_module(config["train_module"])
    tx = importlib.import_module(config["train_module"] + ".xgboost")
    journal = Journal(config["journal"])
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    attempt = journal.next_attempt(rank)
    seen = {"rank": rank, "world": world, "attempt": attempt,
            "collective": [collective.get_rank(), collective.get_world_size(),
                           collective.is_distributed()]}
    if collective.is_distributed():
        import numpy as np

        seen["allreduce"] = _floats(collective.allreduce(np.array([rank + 1.0, 2.0 * rank]),
                                                         collective.Op.SUM))
    x, y, vx, vy = shards(rank, world)
    dtrain = xgboost.DMatrix(x, label=y)
    dvalid = xgboost.DMatrix(vx, label=vy)
    evals = [(dtrain, "train"), (dvalid, "valid")]
    restored = train.get_checkpoint()
    booster, restored_rounds = None, None
    if config["mode"] == "resume" and restored is not None:
        booster = tx.RayTrainReportCallback.get_model(restored)
        restored_rounds = booster.num_boosted_rounds()
    seen["restored"] = restored_rounds
    journal.record(ev="xgb_start", **seen)

    class Kill(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            fault = _kill_due(config, rank, attempt, model.num_boosted_rounds() - 1)
            if fault is not None:
                _fire(journal, train, fault)
            return False

    if config["mode"] == "main":
        phases = XGB_PHASES
    elif config["mode"] == "resume":
        phases = (("resume", RESUME["rounds"] - (restored_rounds or 0), {"frequency": 1}),)
    else:
        phases = (("local", 3, {}),)
    with _Reports(train, journal, rank, attempt) as reports:
        for phase, rounds, kwargs in phases:
            reports.phase = phase
            history: dict = {}
            final = xgboost.train(
                XGB_PARAMS, dtrain, num_boost_round=rounds, evals=evals, verbose_eval=False,
                evals_result=history, xgb_model=booster if phase == "resume" else None,
                callbacks=[tx.RayTrainReportCallback(**kwargs), Kill()])
            journal.record(ev="xgb_phase", rank=rank, attempt=attempt, phase=phase,
                           history=_history(history), rounds=final.num_boosted_rounds(),
                           predictions=_floats(final.predict(xgboost.DMatrix(probe_rows()))))


def xgboost_predictions(booster) -> list:
    import xgboost

    return _floats(booster.predict(xgboost.DMatrix(probe_rows())))


# ------------------------------------------------------------------------ lightgbm
def lightgbm_probe(config: dict) -> None:
    import lightgbm

    train = importlib.import_module(config["train_module"])
    tl = importlib.import_module(config["train_module"] + ".lightgbm")
    journal = Journal(config["journal"])
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    attempt = journal.next_attempt(rank)
    network = tl.get_network_params()
    restored = train.get_checkpoint()
    booster, restored_rounds = None, None
    if config["mode"] == "resume" and restored is not None:
        booster = tl.RayTrainReportCallback.get_model(restored)
        restored_rounds = booster.current_iteration()
    journal.record(ev="lgb_start", rank=rank, world=world, attempt=attempt, network=network,
                   restored=restored_rounds)
    params = dict(LGB_PARAMS, **network)
    if network:
        params.update(tree_learner="data_parallel", pre_partition=True)
    x, y, vx, vy = shards(rank, world)
    dtrain = lightgbm.Dataset(x, label=y)
    dvalid = lightgbm.Dataset(vx, label=vy, reference=dtrain)

    def kill(env):
        fault = _kill_due(config, rank, attempt, env.iteration)
        if fault is not None:
            _fire(journal, train, fault)

    if config["mode"] == "main":
        rounds, kwargs = LGB_ROUNDS, {"frequency": LGB_FREQUENCY}
    elif config["mode"] == "resume":
        rounds, kwargs = RESUME["rounds"] - (restored_rounds or 0), {"frequency": 1}
    else:
        rounds, kwargs = 3, {}
    history: dict = {}
    with _Reports(train, journal, rank, attempt) as reports:
        reports.phase = config["mode"]
        final = lightgbm.train(
            params, dtrain, num_boost_round=rounds, valid_sets=[dtrain, dvalid],
            valid_names=["train", "valid"], init_model=booster,
            callbacks=[tl.RayTrainReportCallback(**kwargs), kill,
                       lightgbm.record_evaluation(history)])
    journal.record(ev="lgb_end", rank=rank, attempt=attempt, history=_history(history),
                   rounds=final.current_iteration(), predictions=lightgbm_predictions(final))
    if config["mode"] == "main":  # then cross-validation on this rank's shard alone
        final.free_network()
        with _Reports(train, journal, rank, attempt) as reports:
            reports.phase = "cv"
            cv = lightgbm.cv(
                dict(LGB_PARAMS), lightgbm.Dataset(x, label=y), num_boost_round=LGB_CV_ROUNDS,
                nfold=2, stratified=False, seed=0,
                callbacks=[tl.RayTrainReportCallback(checkpoint_at_end=False)])
        journal.record(ev="lgb_cv", rank=rank, attempt=attempt,
                       history={k: _floats(v) for k, v in cv.items()})


def lightgbm_predictions(booster) -> list:
    return _floats(booster.predict(probe_rows()))


# ------------------------------------------------------------------------ driver side
def run_fit(impl, framework: str, mode: str, num_workers: int, kill: dict | None = None,
            failure_config=None):
    """fit() of the framework's trainer running this module's probe; returns
    (outcome, journal, setting)."""
    from conformance.scenarios import TrainerFactory, workspace

    module = impl.framework(framework)
    t = impl.train
    trainer = {"xgboost": "XGBoostTrainer", "lightgbm": "LightGBMTrainer"}[framework]
    probe = {"xgboost": xgboost_probe, "lightgbm": lightgbm_probe}[framework]
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    run_config = dict(name=f"{framework}-{mode}", storage_path=os.path.join(folder, "s"))
    if failure_config is not None:
        run_config["failure_config"] = failure_config
    factory = TrainerFactory(getattr(module, trainer), dict(
        train_loop_per_worker=probe,
        train_loop_config={"train_module": t.__name__, "journal": journal, "mode": mode,
                           "kill": kill},
        scaling_config=t.ScalingConfig(num_workers=num_workers),
        run_config=t.RunConfig(**run_config)))
    outcome = impl.fit(factory, max(impl.fit_deadline_s, 180.0))
    setting = (f"{impl.name}: {trainer}(num_workers={num_workers}) running "
               f"conformance.gbdt_probe.{probe.__name__} (mode {mode!r}, {DATA['rows']} rows "
               f"x {DATA['features']} features sharded by rank)"
               + (f", {kill['kind']} of rank {kill['rank']} after round {kill['round']} on "
                  f"attempt {kill['attempt']}" if kill else ""))
    return outcome, Journal(journal), setting


def best_listing(result) -> list:
    """The files of each registered checkpoint, in Result.best_checkpoints order."""
    return [sorted(os.listdir(c.path)) if os.path.isdir(c.path) else ["<gone>"]
            for c, _ in result.best_checkpoints or []]


def deprecated(fn, message: str, what: str, setting: str) -> None:
    """fn() must raise DeprecationWarning(message)."""
    __tracebackhide__ = True
    from conformance import assertions

    try:
        fn()
    except DeprecationWarning as exc:
        assertions.equal(str(exc), message, f"{what}: DeprecationWarning message", setting)
    except Exception as exc:  # noqa: BLE001 - reported as the wrong outcome
        raise AssertionError(f"{what} raised {type(exc).__name__}({exc}), expected "
                             f"DeprecationWarning [{setting}]") from exc
    else:
        raise AssertionError(f"{what} returned, expected DeprecationWarning [{setting}]")
