"""XGBoostTrainer, XGBoostConfig and RayTrainReportCallback (clauses `xgboost.*`).

The training function is `conformance.gbdt_probe.xgboost_probe`: `xgboost.train` on each
rank's shard of a tiny synthetic regression set with the implementation's
RayTrainReportCallback, journaling xgboost.collective's view of the group, every report()
the callback made and the final boosters. The main run (2 workers) trains three times in
a row (`gbdt_probe.XGB_PHASES`): metrics picked by a list, metrics renamed by a dict with
the model saved as model.json, 6 rounds checkpointed every 3 (the last round is one: no
extra final checkpoint), then 5 rounds checkpointed every 2.
"""

from __future__ import annotations

import inspect
import os

import pytest

from conformance import assertions, gbdt_probe
from conformance.catalogue import clause
from conformance.scenarios import shared

WORKERS = 2
NAMES = ["RayTrainReportCallback", "XGBoostConfig", "XGBoostTrainer"]
#: in Ray's __all__ but left out on purpose (see the clause xgboost.names)
V1_LEFTOVERS = {"XGBoostCheckpoint"}
LEGACY = ("The legacy XGBoostTrainer API is deprecated. Please switch to passing in a custom "
          "`train_loop_per_worker` function instead. See this issue for more context: "
          "https://github.com/ray-project/ray/issues/50042")
KEYS = ["train-mae", "train-rmse", "valid-mae", "valid-rmse"]


def _xgboost(impl):
    pytest.importorskip("xgboost")
    return impl.framework("xgboost")


def _main_run(impl):
    def build(impl):
        _xgboost(impl)
        outcome, journal, setting = gbdt_probe.run_fit(impl, "xgboost", "main", WORKERS)
        result = assertions.succeeded(outcome, setting)
        return result, journal, setting

    return shared(impl, "xgboost-main", build)


def _phases(journal, rank: int) -> dict:
    return {e["phase"]: e for e in journal.events("xgb_phase") if e["rank"] == rank}


def _reports(journal, rank: int, attempt: int = 0) -> list:
    return [e for e in journal.events("gbdt_report")
            if e["rank"] == rank and e["attempt"] == attempt]


def _select(history: dict, index: int, kwargs: dict) -> dict:
    """The metrics the callback reports after round `index` (the clause's rule)."""
    values = {key: series[index] for key, series in history.items()}
    metrics = kwargs.get("metrics")
    if isinstance(metrics, dict):
        values = {key: values[log_key] for key, log_key in metrics.items()}
    elif metrics:
        values = {key: values[key] for key in metrics}
    post = kwargs.get("results_postprocessing_fn")
    return post(values) if post else values


def expected_reports(phases: dict, rank: int) -> list:
    """[(phase, metrics, files)] of one rank's reports in the main run."""
    out = []
    for phase, rounds, kwargs in gbdt_probe.XGB_PHASES:
        history = phases[phase]["history"]
        frequency = kwargs.get("frequency", 0)
        filename = kwargs.get("filename", "model.ubj")
        files = [filename] if rank == 0 else None
        last = None
        for i in range(rounds):
            checkpoint = frequency != 0 and (i + 1) % frequency == 0
            last = i if checkpoint else last
            out.append((phase, _select(history, i, kwargs), files if checkpoint else None))
        if kwargs.get("checkpoint_at_end", True) and last != rounds - 1:
            out.append((phase, _select(history, rounds - 1, kwargs), files))
    return out


def _noop(config=None):
    return None


# ------------------------------------------------------------------------ no fit
@clause("xgboost.names")
def check_public_names(impl):
    tx = _xgboost(impl)
    import xgboost.callback

    names = sorted(set(tx.__all__) - V1_LEFTOVERS)
    assertions.equal(names, NAMES, f"{tx.__name__}.__all__ less {sorted(V1_LEFTOVERS)}",
                     impl.name)
    for name in NAMES:
        assertions.equal(hasattr(tx, name), True, f"{tx.__name__}.{name} exists", impl.name)
    cb = tx.RayTrainReportCallback
    assertions.equal(cb.CHECKPOINT_NAME, "model.ubj", "RayTrainReportCallback.CHECKPOINT_NAME",
                     impl.name)
    assertions.equal(issubclass(cb, xgboost.callback.TrainingCallback), True,
                     "RayTrainReportCallback subclasses xgboost.callback.TrainingCallback",
                     impl.name)
    params = inspect.signature(cb).parameters
    assertions.equal({k: p.default for k, p in params.items()},
                     {"metrics": None, "filename": "model.ubj", "frequency": 0,
                      "checkpoint_at_end": True, "results_postprocessing_fn": None},
                     "RayTrainReportCallback parameters and defaults", impl.name)
    params = inspect.signature(cb.get_model).parameters
    assertions.equal([(k, p.default) for k, p in params.items()],
                     [("checkpoint", inspect.Parameter.empty), ("filename", "model.ubj")],
                     "RayTrainReportCallback.get_model parameters", impl.name)


@clause("xgboost.config")
def check_config(impl):
    tx = _xgboost(impl)
    backend = impl.framework("backend")
    config = tx.XGBoostConfig()
    assertions.equal(isinstance(config, backend.BackendConfig), True,
                     f"XGBoostConfig() is a {backend.__name__}.BackendConfig", impl.name)
    assertions.equal(config.xgboost_communicator, "rabit", "XGBoostConfig().xgboost_communicator",
                     impl.name)
    assertions.equal(config.to_dict(), {"xgboost_communicator": "rabit"},
                     "XGBoostConfig().to_dict()", impl.name)
    assertions.equal(isinstance(config.backend_cls, type)
                     and issubclass(config.backend_cls, backend.Backend), True,
                     "XGBoostConfig().backend_cls is a Backend subclass", impl.name)
    built = "".join(["ra", "bit"])  # equal to "rabit", not the same object
    assertions.equal(tx.XGBoostConfig(xgboost_communicator=built).backend_cls,
                     config.backend_cls, "XGBoostConfig(xgboost_communicator=<'rabit' built at "
                     "run time>).backend_cls", impl.name)
    for other in ("tcp", "federated"):  # sorting after and before 'rabit'
        with pytest.raises(NotImplementedError, match=f"Unsupported backend: {other}"):
            _ = tx.XGBoostConfig(xgboost_communicator=other).backend_cls
    try:
        cls = tx.XGBoostConfig(xgboost_communicator="nccl").backend_cls
    except NotImplementedError as exc:
        assertions.equal(str(exc), "Unsupported backend: nccl",
                         "XGBoostConfig(xgboost_communicator='nccl').backend_cls message",
                         impl.name)
    else:
        raise AssertionError(f"XGBoostConfig(xgboost_communicator='nccl').backend_cls returned "
                             f"{cls}, expected NotImplementedError [{impl.name}]")


@clause("xgboost.trainer")
def check_trainer_signature_and_legacy_arguments(impl):
    tx = _xgboost(impl)
    t = impl.train
    cls = tx.XGBoostTrainer
    assertions.equal(issubclass(cls, impl.DataParallelTrainer), True,
                     "XGBoostTrainer subclasses DataParallelTrainer", impl.name)
    params = inspect.signature(cls.__init__).parameters
    seen = [(k, p.kind.name, p.default) for k, p in params.items()][1:]
    keyword = ["train_loop_config", "xgboost_config", "scaling_config", "run_config",
               "datasets", "dataset_config", "validation_config", "metadata",
               "resume_from_checkpoint", "label_column", "params", "num_boost_round"]
    assertions.equal(seen, [("train_loop_per_worker", "POSITIONAL_OR_KEYWORD",
                             inspect.Parameter.empty)]
                     + [(k, "KEYWORD_ONLY", None) for k in keyword],
                     "XGBoostTrainer.__init__ parameters (name, kind, default)", impl.name)
    scaling = t.ScalingConfig(num_workers=1)
    for name, value in (("label_column", ""), ("params", {}), ("num_boost_round", 0)):
        gbdt_probe.deprecated(lambda name=name, value=value: cls(_noop, scaling_config=scaling,
                                                       **{name: value}),
                    LEGACY, f"XGBoostTrainer(fn, {name}={value!r})", impl.name)
    for name in ("metadata", "resume_from_checkpoint"):
        value = {"a": 1} if name == "metadata" else t.Checkpoint.from_directory(
            os.path.dirname(__file__))
        try:
            cls(_noop, scaling_config=scaling, **{name: value})
        except DeprecationWarning:
            pass
        else:
            raise AssertionError(f"XGBoostTrainer(fn, {name}=...) returned, expected "
                                 f"DeprecationWarning [{impl.name}]")
    gbdt_probe.deprecated(lambda: cls.get_model(None),
                "`XGBoostTrainer.get_model` is deprecated. Use "
                "`RayTrainReportCallback.get_model` instead.", "XGBoostTrainer.get_model(None)",
                impl.name)


# ------------------------------------------------------------------------ fits
@clause("xgboost.ranks")
def check_collective_ranks(impl):
    result, journal, setting = _main_run(impl)
    starts = sorted(journal.events("xgb_start"), key=lambda e: e["rank"])
    assertions.equal([e["rank"] for e in starts], list(range(WORKERS)), "ranks that started",
                     setting)
    for e in starts:
        who = f"rank {e['rank']}"
        assertions.equal(e["collective"], [e["rank"], WORKERS, True],
                         f"{who}: xgboost.collective (get_rank(), get_world_size(), "
                         "is_distributed())", setting)
        assertions.equal(e["allreduce"], [3.0, 2.0],
                         f"{who}: collective.allreduce([rank + 1, 2 * rank], SUM)", setting)
    zero, one = _phases(journal, 0), _phases(journal, 1)
    for phase, rounds, _ in gbdt_probe.XGB_PHASES:
        assertions.equal(one[phase]["predictions"], zero[phase]["predictions"],
                         f"phase {phase!r}: rank 1's final predictions (rank 0's)", setting)
        assertions.equal(one[phase]["history"], zero[phase]["history"],
                         f"phase {phase!r}: rank 1's evaluation history (rank 0's: metrics "
                         "are computed over all shards)", setting)
        assertions.equal(zero[phase]["rounds"], rounds,
                         f"phase {phase!r}: num_boosted_rounds()", setting)


@clause("xgboost.report")
def check_report_every_round_from_every_rank(impl):
    result, journal, setting = _main_run(impl)
    for rank in range(WORKERS):
        phases = _phases(journal, rank)
        main = phases["main"]
        assertions.equal(sorted(main["history"]), KEYS,
                         f"rank {rank}: evaluation history keys of the main phase", setting)
        seen = [(e["phase"], e["metrics"], e["files"]) for e in _reports(journal, rank)
                if e["phase"] in ("aligned", "main")]
        want = [w for w in expected_reports(phases, rank) if w[0] in ("aligned", "main")]
        assertions.equal([(p, f) for p, _, f in seen], [(p, f) for p, _, f in want],
                         f"rank {rank}: (phase, files of the reported folder) of the aligned "
                         "and main phases' reports (6 rounds, frequency=3: rounds 2 and 5, no "
                         "final report; 5 rounds, frequency=2: rounds 1 and 3, then the final "
                         "report)", setting)
        assertions.equal([m for _, m, _ in seen], [m for _, m, _ in want],
                         f"rank {rank}: metrics of the aligned and main phases' reports (the "
                         "last value of every '<eval>-<metric>')", setting)
    main = _phases(journal, 0)["main"]["history"]
    assertions.equal(result.metrics, {k: v[-1] for k, v in main.items()},
                     "result.metrics (the last round's)", setting)


@clause("xgboost.report-metrics")
def check_metrics_selection_and_renaming(impl):
    result, journal, setting = _main_run(impl)
    for rank in range(WORKERS):
        phases = _phases(journal, rank)
        seen = [(e["phase"], e["metrics"], e["files"]) for e in _reports(journal, rank)
                if e["phase"] in ("list", "dict")]
        want = [w for w in expected_reports(phases, rank) if w[0] in ("list", "dict")]
        assertions.equal([(p, sorted(m)) for p, m, _ in seen],
                         [("list", ["keys", "train-mae", "valid-rmse"])] * 2
                         + [("dict", ["fit", "loss"])] * 3,
                         f"rank {rank}: (phase, metric keys) of the list and dict phases' "
                         "reports", setting)
        assertions.equal(seen, want, f"rank {rank}: (phase, metrics, files) of the list and "
                         "dict phases' reports", setting)


@clause("xgboost.checkpoint")
def check_checkpoints_and_get_model(impl):
    tx = _xgboost(impl)
    result, journal, setting = _main_run(impl)
    listing = gbdt_probe.best_listing(result)
    assertions.equal(listing, [["model.json"]] + [["model.ubj"]] * 5,
                     "files of each registered checkpoint (Result.best_checkpoints)", setting)
    rounds = []
    for (checkpoint, _), files in zip(result.best_checkpoints, listing, strict=True):
        rounds.append(tx.RayTrainReportCallback.get_model(
            checkpoint, filename=files[0]).num_boosted_rounds())
    assertions.equal(rounds, [2, 3, 6, 2, 4, 5], "get_model(checkpoint, filename).num_boosted_rounds() "
                     "of each registered checkpoint", setting)
    with result.checkpoint.as_directory() as d:
        assertions.equal(sorted(os.listdir(d)), ["model.ubj"], "result.checkpoint files",
                         setting)
    booster = tx.RayTrainReportCallback.get_model(result.checkpoint)
    phases = _phases(journal, 0)
    assertions.equal((booster.num_boosted_rounds(), gbdt_probe.xgboost_predictions(booster)),
                     (5, phases["main"]["predictions"]),
                     "get_model(result.checkpoint) (rounds, predictions): rank 0's final "
                     "booster", setting)
    first = result.best_checkpoints[0][0]
    with open(os.path.join(first.path, "model.json")) as f:
        head = f.read(1)
    assertions.equal(head, "{", "first character of the filename='model.json' checkpoint "
                     "(JSON model format)", setting)
    booster = tx.RayTrainReportCallback.get_model(first, filename="model.json")
    assertions.equal(gbdt_probe.xgboost_predictions(booster), phases["dict"]["predictions"],
                     "get_model(<model.json checkpoint>, filename='model.json') predictions",
                     setting)


@clause("xgboost.local")
def check_local_mode(impl):
    _xgboost(impl)
    outcome, journal, setting = gbdt_probe.run_fit(impl, "xgboost", "local", 0)
    result = assertions.succeeded(outcome, setting)
    (start,) = journal.events("xgb_start")
    assertions.equal((start["rank"], start["world"], start["collective"]), (0, 1, [0, 1, False]),
                     "(world rank, world size, xgboost.collective (get_rank(), "
                     "get_world_size(), is_distributed()))", setting)
    (phase,) = journal.events("xgb_phase")
    history = phase["history"]
    reports = _reports(journal, 0)
    want = [({k: v[i] for k, v in history.items()}, None) for i in range(3)]
    want.append((want[-1][0], ["model.ubj"]))
    assertions.equal([(e["metrics"], e["files"]) for e in reports], want,
                     "(metrics, files) of each report (3 rounds, then the final checkpoint)",
                     setting)
    assertions.equal(result.metrics, want[-1][0], "result.metrics", setting)
    assertions.equal(result.checkpoint is not None, True, "result.checkpoint is not None",
                     setting)
    assertions.equal(os.path.exists(result.checkpoint.path), False,
                     "result.checkpoint's folder exists (the callback's temporary folder)",
                     setting)


@clause("xgboost.resume")
def check_killed_worker_resumes_from_round_checkpoint(impl):
    tx = _xgboost(impl)
    rounds, after = gbdt_probe.RESUME["rounds"], gbdt_probe.RESUME["kill_after"]
    kill = {"kind": "exit", "rank": 1, "attempt": 0, "round": after}
    outcome, journal, setting = gbdt_probe.run_fit(
        impl, "xgboost", "resume", WORKERS, kill=kill,
        failure_config=impl.train.FailureConfig(max_failures=1))
    result = assertions.succeeded(outcome, setting)
    faults = journal.events("gbdt_kill")
    assertions.equal(len(faults), 1, "faults fired", setting)
    setting += f"; checkpoints registered when the fault fired: {faults[0]['registered']}"
    starts = sorted((e["attempt"], e["rank"], e["restored"]) for e in journal.events("xgb_start"))
    assertions.equal(starts, [(0, r, None) for r in range(WORKERS)]
                     + [(1, r, after + 1) for r in range(WORKERS)],
                     "(attempt, rank, num_boosted_rounds of the restored booster) of each start",
                     setting)
    finals = sorted((e["rank"], e["rounds"]) for e in journal.events("xgb_phase"))
    assertions.equal(finals, [(r, rounds) for r in range(WORKERS)],
                     "(rank, num_boosted_rounds) of the boosters that finished", setting)
    resumed = [e["files"] for e in _reports(journal, 0, attempt=1)]
    assertions.equal(resumed, [["model.ubj"]] * (rounds - after - 1 + 1),
                     "files of rank 0's reports on the restarted attempt (frequency=1: one "
                     "per round, then the final report: the callback counts the rounds of "
                     "this xgboost.train call)", setting)
    registered = [tx.RayTrainReportCallback.get_model(c).num_boosted_rounds()
                  for c, _ in result.best_checkpoints]
    assertions.equal(registered, list(range(1, rounds + 1)) + [rounds],
                     "num_boosted_rounds of each registered checkpoint", setting)
    assertions.equal(tx.RayTrainReportCallback.get_model(result.checkpoint)
                     .num_boosted_rounds(), rounds,
                     "get_model(result.checkpoint).num_boosted_rounds()", setting)
