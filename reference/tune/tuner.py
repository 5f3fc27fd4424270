"""`Tuner`: runs a function trainable once per config of a search space, on the cluster.

    tuner = tune.Tuner(train_fn, param_space={"lr": tune.loguniform(1e-4, 1e-1)},
                       tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=8,
                                                   scheduler=ASHAScheduler()),
                       run_config=tune.RunConfig(name="exp", storage_path="/tmp/results"))
    best = tuner.fit().get_best_result()

The experiment folder `<storage_path>/<name>` holds `tuner.pkl` (what `Tuner.restore`
needs), `experiment_state.json` and the searcher's state, and one folder per trial with
`params.json`, `params.pkl`, `result.json` (a JSON line per result), `progress.csv` and its
`checkpoint_<n>` folders.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from typing import Any, Callable, Optional

from reference._folder_safety import check_owned
from reference.tune._config import RunConfig
from reference.tune._tune_config import TuneConfig
from reference.tune.error import TuneError
from reference.tune.experiment.trial import Trial

logger = logging.getLogger(__name__)

TUNER_FILE = "tuner.pkl"


class Tuner:
    def __init__(self, trainable: Optional[Callable] = None, *,
                 param_space: Optional[dict[str, Any]] = None,
                 tune_config: Optional[TuneConfig] = None,
                 run_config: Optional[RunConfig] = None, _restored: Optional[dict] = None):
        if not trainable:
            raise TuneError("You need to provide a trainable to tune.")
        self._name = _trainable_name(trainable)
        self.trainable = trainable
        self.param_space = dict(param_space or {})
        if param_space is not None and not isinstance(param_space, dict):
            raise ValueError(f"Tuner(param_space={param_space!r}): expected a dict.")
        self.tune_config = tune_config or TuneConfig()
        if not isinstance(self.tune_config, TuneConfig):
            raise TypeError(f"Tuner(tune_config={tune_config!r}): expected a tune.TuneConfig.")
        self.run_config = _as_tune_run_config(run_config)
        self._restored = _restored
        self._results = None

    # -- running ------------------------------------------------------------------------------
    def fit(self):
        """Run every trial (or resume the restored experiment) and return the ResultGrid.
        A trial's error does not raise here: it is in `ResultGrid.errors` (unless
        `FailureConfig(fail_fast="raise")`)."""
        from reference import _runtime
        from reference.tune._controller import TuneController
        from reference.tune._progress import ProgressReporter
        from reference.tune.result_grid import ResultGrid
        from reference.tune.schedulers import FIFOScheduler
        from reference.tune.search.search_generator import prepare_search_alg

        tc, rc = self.tune_config, self.run_config
        if tc.mode not in (None, "min", "max"):
            raise ValueError("The `mode` parameter passed to `Tuner(...)` must be one of "
                             "['min', 'max']")
        scheduler = tc.scheduler or FIFOScheduler()
        search_alg = prepare_search_alg(tc.search_alg, metric=tc.metric, mode=tc.mode,
                                        param_space=self.param_space,
                                        max_concurrent_trials=tc.max_concurrent_trials)
        if not scheduler.set_search_properties(tc.metric, tc.mode):
            raise ValueError(
                "You passed a `metric` or `mode` argument to `Tuner(...)`, but the scheduler "
                "you are using was already instantiated with their own `metric` and `mode` "
                "parameters. Either remove the arguments from your scheduler or from "
                "`Tuner(...)` args.")
        if self._restored is None:
            search_alg.add_configurations(self.param_space, tc.num_samples)
            name = rc.name or f"{self._name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
            path = os.path.join(rc.resolved_storage_path, name)
            os.makedirs(path, exist_ok=True)
            check_owned(path, f"RunConfig(storage_path={rc.storage_path!r}, name={name!r}): "
                              "the experiment folder")  # planted links, docs/security.md
            self._save_tuner(path, name)
            trials, experiment_id = [], None
        else:
            name, path = self._restored["name"], self._restored["path"]
            search_alg.add_configurations(self.param_space, tc.num_samples)
            if self._restored.get("searcher_state") is not None:
                search_alg.set_state(self._restored["searcher_state"])
            trials, experiment_id = self._restored["trials"], self._restored["experiment_id"]
            _prepare_resume(trials, *self._restored["resume"])
            for trial in trials:
                if not trial.is_finished():
                    scheduler.on_trial_add(None, trial)
        verbose = 2 if rc.verbose is None else rc.verbose
        reporter = ProgressReporter(metric=tc.metric, mode=tc.mode,
                                    searched=_searched_keys(self.param_space),
                                    verbose=verbose, experiment_name=name)
        controller = TuneController(
            trainable=self.trainable, trainable_name=self._name,
            param_space=self.param_space, tune_config=tc, run_config=rc,
            experiment_path=path, experiment_name=name, search_alg=search_alg,
            scheduler=scheduler, trials=trials, reporter=reporter,
            experiment_id=experiment_id)
        # the frameworks the script imported (the trainables' trainers): every trial's
        # process is forked from a node that has them
        cluster = _runtime.ensure_cluster(_runtime.imported_frameworks())
        trials = controller.run(cluster)
        reporter.final(trials)
        if rc.failure_config.fail_fast == "raise" and controller.fail_fast_error is not None:
            raise controller.fail_fast_error
        self._results = ResultGrid(trials, path, tc.metric, tc.mode)
        return self._results

    def get_results(self):
        """The ResultGrid of the last `fit()` (or of a restored experiment)."""
        if self._results is None:
            if self._restored is not None:
                from reference.tune.result_grid import ResultGrid

                return ResultGrid(self._restored["trials"], self._restored["path"],
                                  self.tune_config.metric, self.tune_config.mode)
            raise RuntimeError("Can't return results as experiment has not been run, yet. "
                               "Call `Tuner.fit()` to run the experiment first.")
        return self._results

    # -- restore ------------------------------------------------------------------------------
    def _save_tuner(self, path: str, name: str) -> None:
        import cloudpickle

        state = {"param_space": self.param_space, "tune_config": self.tune_config,
                 "run_config": self.run_config, "name": name, "trainable_name": self._name}
        staging = os.path.join(path, TUNER_FILE + ".tmp")
        with open(staging, "wb") as f:
            cloudpickle.dump(state, f)
        os.replace(staging, os.path.join(path, TUNER_FILE))

    @classmethod
    def can_restore(cls, path, storage_filesystem=None) -> bool:
        """True when `path` is an experiment folder a Tuner wrote."""
        return os.path.isfile(os.path.join(os.fspath(path), TUNER_FILE))

    @classmethod
    def restore(cls, path, trainable: Callable, resume_unfinished: bool = True,
                resume_errored: bool = False, restart_errored: bool = False,
                param_space: Optional[dict] = None, storage_filesystem=None) -> Tuner:
        """Continue the experiment in `path`: finished trials stay as they are; unfinished
        ones resume from their latest checkpoint (`resume_unfinished`); errored ones resume
        from theirs (`resume_errored`) or start over (`restart_errored`). `param_space`
        re-supplies objects that could not be pickled (same keys as the original).

        Restore only folders you trust: restoring unpickles files of the experiment folder
        (`tuner.pkl`, the searcher's saved state, each trial's `params.pkl` and `error.pkl`),
        and unpickling runs whatever code the file's author chose. A folder that other users
        can write into is not trusted (docs/security.md)."""
        import pickle

        from reference.tune._experiment_files import EXPERIMENT_STATE, SEARCHER_STATE

        path = os.path.abspath(os.fspath(path))
        if not cls.can_restore(path):
            raise ValueError(f"Tuner.restore(path={path!r}): no {TUNER_FILE} there; pass the "
                             "folder <storage_path>/<name> of an experiment a Tuner ran.")
        if resume_errored and restart_errored:
            raise ValueError("Tuner.restore(...): pass resume_errored=True or "
                             "restart_errored=True, not both.")
        with open(os.path.join(path, TUNER_FILE), "rb") as f:
            saved = pickle.load(f)
        trials, experiment_id = [], None
        if os.path.exists(os.path.join(path, EXPERIMENT_STATE)):
            with open(os.path.join(path, EXPERIMENT_STATE)) as f:
                state = json.load(f)
            experiment_id = state["experiment_id"]
            trials = [Trial.from_state(t, path) for t in state["trials"]]
        searcher_state = None
        if os.path.exists(os.path.join(path, SEARCHER_STATE)):
            with open(os.path.join(path, SEARCHER_STATE), "rb") as f:
                searcher_state = pickle.load(f)
        for trial in trials:
            if trial.status == Trial.ERROR:
                trial.error = TuneError(trial.error_text or "the trial errored")
        space = saved["param_space"]
        if param_space is not None:
            space = {**space, **param_space}
        return cls(trainable, param_space=space, tune_config=saved["tune_config"],
                   run_config=saved["run_config"],
                   _restored={"name": saved["name"], "path": path, "trials": trials,
                              "experiment_id": experiment_id,
                              "searcher_state": searcher_state,
                              "resume": (resume_unfinished, resume_errored, restart_errored)})


def _prepare_resume(trials: list, resume_unfinished: bool, resume_errored: bool,
                    restart_errored: bool) -> None:
    """What `Tuner.restore`'s flags do to the loaded trials when the experiment goes on."""
    for trial in trials:
        if trial.status == Trial.ERROR and (resume_errored or restart_errored):
            trial.status, trial.error, trial.error_text = Trial.PENDING, None, None
            trial.num_failures = 0
            trial.restore_from = trial.checkpoint if resume_errored else None
            if restart_errored:
                trial.results, trial.last_result, trial.checkpoints = [], {}, []
                trial.iteration, trial.time_total_s = 0, 0.0
        elif not trial.is_finished():
            if resume_unfinished:
                trial.status = Trial.PENDING
                trial.restore_from = trial.restore_from or trial.checkpoint
            else:
                trial.status = Trial.TERMINATED


def _trainable_name(trainable) -> str:
    if isinstance(trainable, str):
        raise TuneError(f"Unknown trainable {trainable!r}: the reference's Tuner takes the "
                        "function to run, not a registered name.")
    from reference.tune.trainable import Trainable

    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        raise TuneError(f"Tuner({trainable.__name__}): class trainables are not supported by "
                        "the reference; pass a function `fn(config)` that calls tune.report.")
    if not callable(trainable) or isinstance(trainable, type):
        raise TuneError("Improper 'run' - not string nor trainable.")
    name = getattr(trainable, "__name__", None)
    if name is None and hasattr(trainable, "func"):
        name = getattr(trainable.func, "__name__", None)
    if name is None:
        return "DEFAULT"
    return "lambda" if name == "<lambda>" else ("DEFAULT" if name.startswith("<") else name)


def _as_tune_run_config(run_config) -> RunConfig:
    if run_config is None:
        return RunConfig()
    if isinstance(run_config, RunConfig):
        return run_config
    from reference.train import RunConfig as TrainRunConfig

    if isinstance(run_config, TrainRunConfig):
        warnings.warn("The `RunConfig` class should be imported from `reference.tune` when "
                      "passing it to the Tuner.", DeprecationWarning, stacklevel=3)
        from reference.tune._config import FailureConfig

        failure = run_config.failure_config
        return RunConfig(name=run_config.name, storage_path=run_config.storage_path,
                         failure_config=FailureConfig(max_failures=failure.max_failures)
                         if failure else None)
    raise TypeError(f"Tuner(run_config={run_config!r}): expected a tune.RunConfig.")


def _searched_keys(space) -> list[str]:
    from reference.tune.search.sample import Domain
    from reference.tune.search.variant_generator import _leaves

    return ["/".join(map(str, path)) for path, leaf in _leaves(space)
            if isinstance(leaf, Domain) or (isinstance(leaf, dict)
                                            and set(leaf) == {"grid_search"})]
