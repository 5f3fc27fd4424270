"""LightGBMTrainer, LightGBMConfig, get_network_params, RayTrainReportCallback and
normalize_pandas_for_lightgbm (clauses `lightgbm.*`).

The training function is `conformance.gbdt_probe.lightgbm_probe`: it merges
`get_network_params()` into its params (with tree_learner='data_parallel' when there are
any) and calls `lightgbm.train` on its rank's shard of a tiny synthetic regression set with
the implementation's RayTrainReportCallback, journaling the network parameters, every
report() the callback made and the final booster. The main run: 2 workers, 5 iterations,
checkpoints every 2.
"""

from __future__ import annotations

import inspect
import os

import pytest

from conformance import assertions, gbdt_probe
from conformance.catalogue import clause
from conformance.scenarios import shared

WORKERS = 2
NAMES = ["LightGBMConfig", "LightGBMTrainer", "RayTrainReportCallback", "get_network_params",
         "normalize_pandas_for_lightgbm"]
#: in Ray's __all__ but left out on purpose (see the clause lightgbm.names)
V1_LEFTOVERS = {"LightGBMCheckpoint"}
LEGACY = ("The legacy LightGBMTrainer API is deprecated. Please switch to passing in a custom "
          "`train_loop_per_worker` function instead. See this issue for more context: "
          "https://github.com/ray-project/ray/issues/50042")
KEYS = ["train-l1", "train-l2", "valid-l1", "valid-l2"]
NETWORK_KEYS = ["local_listen_port", "machines", "num_machines"]


def _lightgbm(impl):
    pytest.importorskip("lightgbm")
    return impl.framework("lightgbm")


def _main_run(impl):
    def build(impl):
        _lightgbm(impl)
        outcome, journal, setting = gbdt_probe.run_fit(impl, "lightgbm", "main", WORKERS)
        result = assertions.succeeded(outcome, setting)
        return result, journal, setting

    return shared(impl, "lightgbm-main", build)


def _by_rank(journal, ev: str) -> dict:
    return {e["rank"]: e for e in journal.events(ev)}


def _reports(journal, rank: int, attempt: int = 0) -> list:
    return [e for e in journal.events("gbdt_report")
            if e["rank"] == rank and e["attempt"] == attempt]


def _noop(config=None):
    return None


# ------------------------------------------------------------------------ no fit
@clause("lightgbm.names")
def check_public_names(impl):
    tl = _lightgbm(impl)
    names = sorted(set(tl.__all__) - V1_LEFTOVERS)
    assertions.equal(names, NAMES, f"{tl.__name__}.__all__ less {sorted(V1_LEFTOVERS)}",
                     impl.name)
    for name in NAMES:
        assertions.equal(hasattr(tl, name), True, f"{tl.__name__}.{name} exists", impl.name)
    cb = tl.RayTrainReportCallback
    assertions.equal(cb.CHECKPOINT_NAME, "model.txt", "RayTrainReportCallback.CHECKPOINT_NAME",
                     impl.name)
    params = inspect.signature(cb).parameters
    assertions.equal({k: p.default for k, p in params.items()},
                     {"metrics": None, "filename": "model.txt", "frequency": 0,
                      "checkpoint_at_end": True, "results_postprocessing_fn": None},
                     "RayTrainReportCallback parameters and defaults", impl.name)
    params = inspect.signature(cb.get_model).parameters
    assertions.equal([(k, p.default) for k, p in params.items()],
                     [("checkpoint", inspect.Parameter.empty), ("filename", "model.txt")],
                     "RayTrainReportCallback.get_model parameters", impl.name)
    backend = impl.framework("backend")
    config = tl.LightGBMConfig()
    assertions.equal(isinstance(config, backend.BackendConfig), True,
                     f"LightGBMConfig() is a {backend.__name__}.BackendConfig", impl.name)
    assertions.equal(config.to_dict(), {}, "LightGBMConfig().to_dict()", impl.name)
    assertions.equal(issubclass(config.backend_cls, backend.Backend), True,
                     "LightGBMConfig().backend_cls is a Backend subclass", impl.name)


@clause("lightgbm.trainer")
def check_trainer_signature_and_legacy_arguments(impl):
    tl = _lightgbm(impl)
    t = impl.train
    cls = tl.LightGBMTrainer
    assertions.equal(issubclass(cls, impl.DataParallelTrainer), True,
                     "LightGBMTrainer subclasses DataParallelTrainer", impl.name)
    params = inspect.signature(cls.__init__).parameters
    seen = [(k, p.kind.name, p.default) for k, p in params.items()][1:]
    keyword = ["train_loop_config", "lightgbm_config", "scaling_config", "run_config",
               "datasets", "dataset_config", "validation_config", "metadata",
               "resume_from_checkpoint", "label_column", "params", "num_boost_round"]
    assertions.equal(seen, [("train_loop_per_worker", "POSITIONAL_OR_KEYWORD",
                             inspect.Parameter.empty)]
                     + [(k, "KEYWORD_ONLY", None) for k in keyword],
                     "LightGBMTrainer.__init__ parameters (name, kind, default)", impl.name)
    scaling = t.ScalingConfig(num_workers=1)
    for name, value in (("label_column", ""), ("params", {}), ("num_boost_round", 0)):
        gbdt_probe.deprecated(lambda name=name, value=value: cls(_noop, scaling_config=scaling,
                                                       **{name: value}),
                    LEGACY, f"LightGBMTrainer(fn, {name}={value!r})", impl.name)
    for name in ("metadata", "resume_from_checkpoint"):
        value = {"a": 1} if name == "metadata" else t.Checkpoint.from_directory(
            os.path.dirname(__file__))
        try:
            cls(_noop, scaling_config=scaling, **{name: value})
        except DeprecationWarning:
            pass
        else:
            raise AssertionError(f"LightGBMTrainer(fn, {name}=...) returned, expected "
                                 f"DeprecationWarning [{impl.name}]")
    gbdt_probe.deprecated(lambda: cls.get_model(None),
                "`LightGBMTrainer.get_model` is deprecated. Use "
                "`RayTrainReportCallback.get_model` instead.", "LightGBMTrainer.get_model(None)",
                impl.name)


@clause("lightgbm.normalize-pandas")
def check_normalize_pandas(impl):
    tl = _lightgbm(impl)
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    frame = pd.DataFrame({
        "i": pd.array([1, 2], dtype=pd.ArrowDtype(pa.int32())),
        "u": pd.array([1, 2], dtype=pd.ArrowDtype(pa.uint8())),
        "f": pd.array([1.5, 2.5], dtype=pd.ArrowDtype(pa.float64())),
        "b": pd.array([True, False], dtype=pd.ArrowDtype(pa.bool_())),
        "s": pd.array(["a", "b"], dtype=pd.ArrowDtype(pa.string())),
    })
    frame.insert(0, "n", [1.0, 2.0])  # a plain column before the Arrow ones
    out = tl.normalize_pandas_for_lightgbm(frame)
    assertions.equal({k: str(v) for k, v in out.dtypes.items()},
                     {"i": "Int32", "u": "UInt8", "f": "Float64", "b": "boolean",
                      "s": "string[pyarrow]", "n": "float64"},
                     "dtypes of normalize_pandas_for_lightgbm(frame)", impl.name)
    assertions.equal(out["i"].tolist(), [1, 2], "values of the int column", impl.name)
    plain = pd.DataFrame({"x": [1, 2], "y": [0.5, 1.5]})
    assertions.equal(tl.normalize_pandas_for_lightgbm(plain) is plain, True,
                     "a frame without Arrow columns comes back as the same object", impl.name)


# ------------------------------------------------------------------------ fits
@clause("lightgbm.network-params")
def check_network_params(impl):
    tl = _lightgbm(impl)
    assertions.equal(tl.get_network_params(), {},
                     "get_network_params() outside a LightGBMTrainer", impl.name)
    result, journal, setting = _main_run(impl)
    starts = _by_rank(journal, "lgb_start")
    assertions.equal(sorted(starts), list(range(WORKERS)), "ranks that started", setting)
    ports = [starts[r]["network"].get("local_listen_port") for r in range(WORKERS)]
    assertions.equal(len(set(ports)), WORKERS, f"distinct local_listen_port values {ports}",
                     setting)
    for rank, e in sorted(starts.items()):
        who = f"rank {rank}"
        net = e["network"]
        assertions.equal(sorted(net), NETWORK_KEYS, f"{who}: get_network_params() keys",
                         setting)
        assertions.equal(net["num_machines"], WORKERS, f"{who}: num_machines", setting)
        assertions.equal(isinstance(net["local_listen_port"], int), True,
                         f"{who}: local_listen_port {net['local_listen_port']!r} is an int",
                         setting)
        machines = net["machines"].split(",")
        assertions.equal([m.rsplit(":", 1)[-1] for m in machines], [str(p) for p in ports],
                         f"{who}: ports of machines={net['machines']!r} (each rank's "
                         "local_listen_port, in rank order)", setting)
        assertions.equal(net["machines"], starts[0]["network"]["machines"],
                         f"{who}: machines (rank 0's)", setting)
    ends = _by_rank(journal, "lgb_end")
    assertions.equal(ends[1]["predictions"], ends[0]["predictions"],
                     "rank 1's final predictions (rank 0's: one data-parallel model)", setting)
    assertions.equal(ends[0]["rounds"], gbdt_probe.LGB_ROUNDS,
                     "current_iteration() of the final booster", setting)


@clause("lightgbm.report")
def check_report_every_iteration_from_every_rank(impl):
    result, journal, setting = _main_run(impl)
    ends = _by_rank(journal, "lgb_end")
    n, freq = gbdt_probe.LGB_ROUNDS, gbdt_probe.LGB_FREQUENCY
    for rank in range(WORKERS):
        history = ends[rank]["history"]
        assertions.equal(sorted(history), KEYS, f"rank {rank}: evaluation history keys",
                         setting)
        reports = [e for e in _reports(journal, rank) if e["phase"] == "main"]
        want_files = [(["model.txt"] if rank == 0 else None)
                      if (i + 1) % freq == 0 or i == n - 1 else None for i in range(n)]
        assertions.equal([e["files"] for e in reports], want_files,
                         f"rank {rank}: files of each report's folder ({n} iterations, "
                         f"frequency={freq}: iterations 2, 5 and the last; no extra report)",
                         setting)
        assertions.equal([e["metrics"] for e in reports],
                         [{k: v[i] for k, v in history.items()} for i in range(n)],
                         f"rank {rank}: metrics of each report (every '<valid name>-<metric>' "
                         "of the iteration)", setting)
    history = ends[0]["history"]
    assertions.equal(result.metrics, {k: v[-1] for k, v in history.items()},
                     "result.metrics (the last iteration's)", setting)


@clause("lightgbm.report")
def check_cross_validation_reports_mean_and_stdv(impl):
    result, journal, setting = _main_run(impl)
    setting += (f", then lightgbm.cv(nfold=2, num_boost_round={gbdt_probe.LGB_CV_ROUNDS}) "
                "on each rank's shard with RayTrainReportCallback(checkpoint_at_end=False)")
    for rank, e in sorted(_by_rank(journal, "lgb_cv").items()):
        history = e["history"]  # {'valid l2-mean': [...], 'valid l2-stdv': [...], ...}
        want = [{k.replace(" ", "-"): v[i] for k, v in history.items()}
                for i in range(gbdt_probe.LGB_CV_ROUNDS)]
        seen = [(r["metrics"], r["files"]) for r in _reports(journal, rank)
                if r["phase"] == "cv"]
        assertions.equal(seen, [(m, None) for m in want],
                         f"rank {rank}: (metrics, checkpoint files) of the cross-validation's "
                         "reports ('valid-<metric>-mean' and 'valid-<metric>-stdv')", setting)


@clause("lightgbm.checkpoint")
def check_checkpoints_and_get_model(impl):
    tl = _lightgbm(impl)
    result, journal, setting = _main_run(impl)
    listing = gbdt_probe.best_listing(result)
    assertions.equal(listing, [["model.txt"]] * 3,
                     "files of each registered checkpoint (Result.best_checkpoints)", setting)
    rounds = [tl.RayTrainReportCallback.get_model(c).current_iteration()
              for c, _ in result.best_checkpoints]
    assertions.equal(rounds, [3, 6, 7], "get_model(checkpoint).current_iteration() of each "
                     "registered checkpoint", setting)
    with result.checkpoint.as_directory() as d:
        assertions.equal(sorted(os.listdir(d)), ["model.txt"], "result.checkpoint files",
                         setting)
        with open(os.path.join(d, "model.txt")) as f:
            head = f.readline().strip()
    assertions.equal(head, "tree", "first line of model.txt (LightGBM's text format)", setting)
    booster = tl.RayTrainReportCallback.get_model(result.checkpoint)
    seen = gbdt_probe.lightgbm_predictions(booster)
    want = _by_rank(journal, "lgb_end")[0]["predictions"]
    error = max(abs(a - b) for a, b in zip(seen, want, strict=True))
    assertions.equal(error <= 1e-9, True, f"get_model(result.checkpoint) predictions within "
                     f"1e-9 of rank 0's final booster (off by {error:.3g})", setting)


@clause("lightgbm.local")
def check_local_mode(impl):
    _lightgbm(impl)
    outcome, journal, setting = gbdt_probe.run_fit(impl, "lightgbm", "local", 0)
    result = assertions.succeeded(outcome, setting)
    (start,) = journal.events("lgb_start")
    assertions.equal((start["rank"], start["world"], start["network"]), (0, 1, {}),
                     "(world rank, world size, get_network_params())", setting)
    (end,) = journal.events("lgb_end")
    history = end["history"]
    want = [({k: v[i] for k, v in history.items()}, None) for i in range(3)]
    want[-1] = (want[-1][0], ["model.txt"])
    assertions.equal([(e["metrics"], e["files"]) for e in _reports(journal, 0)], want,
                     "(metrics, files) of each report (3 iterations, the last checkpointed)",
                     setting)
    assertions.equal(end["rounds"], 3, "current_iteration() of the final booster", setting)
    assertions.equal(result.metrics, want[-1][0], "result.metrics", setting)
    assertions.equal(result.checkpoint is not None, True, "result.checkpoint is not None",
                     setting)
    assertions.equal(os.path.exists(result.checkpoint.path), False,
                     "result.checkpoint's folder exists (the callback's temporary folder)",
                     setting)


@clause("lightgbm.resume")
def check_killed_worker_resumes_from_iteration_checkpoint(impl):
    tl = _lightgbm(impl)
    rounds, after = gbdt_probe.RESUME["rounds"], gbdt_probe.RESUME["kill_after"]
    kill = {"kind": "sigkill", "rank": 1, "attempt": 0, "round": after}
    outcome, journal, setting = gbdt_probe.run_fit(
        impl, "lightgbm", "resume", WORKERS, kill=kill,
        failure_config=impl.train.FailureConfig(max_failures=1))
    result = assertions.succeeded(outcome, setting)
    faults = journal.events("gbdt_kill")
    assertions.equal(len(faults), 1, "faults fired", setting)
    setting += f"; checkpoints registered when the fault fired: {faults[0]['registered']}"
    starts = sorted((e["attempt"], e["rank"], e["restored"]) for e in journal.events("lgb_start"))
    assertions.equal(starts, [(0, r, None) for r in range(WORKERS)]
                     + [(1, r, after + 1) for r in range(WORKERS)],
                     "(attempt, rank, current_iteration of the restored booster) of each start",
                     setting)
    finals = sorted((e["rank"], e["rounds"]) for e in journal.events("lgb_end"))
    assertions.equal(finals, [(r, rounds) for r in range(WORKERS)],
                     "(rank, current_iteration) of the boosters that finished", setting)
    resumed = [e["files"] for e in _reports(journal, 0, attempt=1)]
    assertions.equal(resumed, [["model.txt"]] * (rounds - after - 1),
                     "files of rank 0's reports on the restarted attempt (frequency=1: one "
                     "per iteration, no extra report)", setting)
    registered = [tl.RayTrainReportCallback.get_model(c).current_iteration()
                  for c, _ in result.best_checkpoints]
    assertions.equal(registered, list(range(1, rounds + 1)),
                     "current_iteration of each registered checkpoint", setting)
    assertions.equal(tl.RayTrainReportCallback.get_model(result.checkpoint).current_iteration(),
                     rounds, "get_model(result.checkpoint).current_iteration()", setting)
