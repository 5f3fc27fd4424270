"""MLflow for Train workers and Tune trials, as `ray.air.integrations.mlflow` (Ray 2.60).

- `setup_mlflow(config, ...)`, called in a training function or a trial: picks the tracking
  (and registry) URI and the experiment, starts an active MLflow run, logs `config`
  (flattened with "/") as its params and returns the `mlflow` module. In a Train worker
  whose world rank is not 0 it returns a stand-in whose every attribute and call gives None
  (unless `rank_zero_only=False`). In a Tune trial the experiment id and name default to the
  trial's id and name.
- `MLflowLoggerCallback(tracking_uri, *, ...)`, a Tune logger: an MLflow run per trial
  (tagged `trial_name`), the config as params when the trial starts (or ends, with
  `log_params_on_trial_end`), every result's values that convert to float as metrics at
  step `timesteps_total` or `training_iteration`, the trial folder as artifacts with
  `save_artifact`, and the run ended FINISHED or FAILED.
- The experiment: the given id (or MLFLOW_EXPERIMENT_ID) if it exists, else the given name
  (or MLFLOW_EXPERIMENT_NAME) if it exists, else one created by that name where allowed
  (always for the callback; with `create_experiment_if_not_exists` for setup_mlflow), else
  Ray's ValueError. `tracking_token` is put in MLFLOW_TRACKING_TOKEN.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Optional

from reference.tune.logger.logger import LoggerCallback, flatten_dict

logger = logging.getLogger(__name__)

#: what one log_batch request may carry (MLflow's REST limits)
_PARAMS_PER_BATCH, _METRICS_PER_BATCH = 100, 1000

MISSING = "mlflow was not found - please install with `pip install mlflow`"


def _mlflow():
    try:
        import mlflow
    except ImportError:
        return None
    return mlflow


class _NoopModule:
    """What ranks other than 0 get: any attribute is another stand-in, any call None."""

    def __getattr__(self, item):
        return _NoopModule()

    def __call__(self, *args, **kwargs):
        return None


def _floats(values: dict) -> dict:
    """The values that `float()` accepts (numbers, bools, numeric strings), as floats."""
    out = {}
    for key, value in values.items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            logger.debug("%s=%r is not logged to MLflow: not a float", key, value)
    return out


class _Tracking:
    """One tracking URI and experiment; runs started, logged to and ended in it."""

    def __init__(self, mlflow, tracking_uri=None, registry_uri=None, experiment_id=None,
                 experiment_name=None, tracking_token=None, artifact_location=None,
                 create: bool = True):
        self.mlflow = mlflow
        if tracking_token:
            os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
        mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_registry_uri(registry_uri)
        self.experiment_id = self._experiment(experiment_id, experiment_name,
                                              artifact_location, create)

    def _experiment(self, experiment_id, name, artifact_location, create) -> str:
        from mlflow.exceptions import MlflowException

        experiment_id = experiment_id if experiment_id is not None else os.environ.get(
            "MLFLOW_EXPERIMENT_ID")
        if experiment_id is not None:
            try:
                self.mlflow.get_experiment(experiment_id=experiment_id)
                return experiment_id
            except MlflowException:
                pass
        name = name if name is not None else os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if name is not None:
            found = self.mlflow.get_experiment_by_name(name=name)
            if found:
                return found.experiment_id
        if name and create:
            return self.mlflow.create_experiment(name=name, artifact_location=artifact_location)
        if create:
            raise ValueError(f"Experiment with the provided experiment_id: {experiment_id} "
                             "does not exist and no experiment_name provided. At least one "
                             "of these has to be provided.")
        raise ValueError(f"Experiment with the provided experiment_id: {experiment_id} or "
                         f"experiment_name: {name} does not exist. Please create an MLflow "
                         "experiment and provide either its id or name.")

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.mlflow.get_tracking_uri(),
                            registry_uri=self.mlflow.get_registry_uri())

    def log_params(self, run_id: str, params: dict) -> None:
        from mlflow.entities import Param

        entries = [Param(key, str(value)) for key, value in flatten_dict(params).items()]
        self._log_batch(run_id, "params", entries, _PARAMS_PER_BATCH)

    def log_metrics(self, run_id: str, metrics: dict, step) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        entries = [Metric(key, value, now, step or 0)
                   for key, value in _floats(flatten_dict(metrics)).items()]
        self._log_batch(run_id, "metrics", entries, _METRICS_PER_BATCH)

    def _log_batch(self, run_id: str, kind: str, entries: list, size: int) -> None:
        """One store call per `size` entries (the REST API's limits per request), where a
        call per key cost a round trip and a transaction each: 38.8 ms per 11-metric
        result on a SQLite store (`ci/bench/tracker_bench.py`)."""
        client = self.client()
        for start in range(0, len(entries), size):
            client.log_batch(run_id, **{kind: entries[start:start + size]})


def _trial_defaults(rank_zero_only: bool):
    """(experiment id, experiment name) defaults; None for a rank that logs nothing."""
    from reference import train, tune

    try:
        context = tune.get_context()  # in a Tune trial: the trial's id and name
        return context.get_trial_id(), context.get_trial_name()
    except RuntimeError:
        pass
    try:
        rank = train.get_context().get_world_rank()
    except RuntimeError:  # on the driver: no defaults, logs as the caller asked
        return None, None
    if rank_zero_only and rank != 0:
        return None
    return None, None


def setup_mlflow(config: Optional[dict] = None, tracking_uri: Optional[str] = None,
                 registry_uri: Optional[str] = None, experiment_id: Optional[str] = None,
                 experiment_name: Optional[str] = None, tracking_token: Optional[str] = None,
                 artifact_location: Optional[str] = None, run_name: Optional[str] = None,
                 create_experiment_if_not_exists: bool = False, tags: Optional[dict] = None,
                 rank_zero_only: bool = True):
    mlflow = _mlflow()
    if mlflow is None:
        raise RuntimeError(MISSING)
    defaults = _trial_defaults(rank_zero_only)
    if defaults is None:
        return _NoopModule()
    experiment_id = experiment_id or defaults[0]
    experiment_name = experiment_name or defaults[1]
    tracking = _Tracking(mlflow, tracking_uri, registry_uri, experiment_id, experiment_name,
                         tracking_token, artifact_location, create_experiment_if_not_exists)
    if mlflow.active_run() is None:
        mlflow.start_run(run_name=run_name or experiment_name,
                         experiment_id=tracking.experiment_id, tags=tags or {})
    for key, value in flatten_dict(dict(config or {})).items():
        mlflow.log_param(key=key, value=value)
    return mlflow


class MLflowLoggerCallback(LoggerCallback):
    def __init__(self, tracking_uri: Optional[str] = None, *,
                 registry_uri: Optional[str] = None, experiment_name: Optional[str] = None,
                 tags: Optional[dict] = None, tracking_token: Optional[str] = None,
                 save_artifact: bool = False, log_params_on_trial_end: bool = False):
        import mlflow  # noqa: F401 - ModuleNotFoundError without it, as in Ray

        self.tracking_uri, self.registry_uri = tracking_uri, registry_uri
        self.experiment_name, self.tags = experiment_name, tags
        self.tracking_token = tracking_token
        self.should_save_artifact = save_artifact
        self.log_params_on_trial_end = log_params_on_trial_end
        self._tracking: Optional[_Tracking] = None
        self._trial_runs: dict = {}

    def setup(self, *args, **kwargs) -> None:
        """On the driver before the first trial: the experiment (created when missing)."""
        self._tracking = _Tracking(_mlflow(), self.tracking_uri, self.registry_uri, None,
                                   self.experiment_name, self.tracking_token)
        self.tags = {} if self.tags is None else self.tags
        self._trial_runs = {}

    def log_trial_start(self, trial) -> None:
        if trial not in self._trial_runs:
            run = self._tracking.client().create_run(
                experiment_id=self._tracking.experiment_id, run_name=str(trial),
                tags={**self.tags, "trial_name": str(trial)})
            self._trial_runs[trial] = run.info.run_id
        if not self.log_params_on_trial_end:
            self._tracking.log_params(self._trial_runs[trial], trial.config)

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        step = result.get("timesteps_total") or result["training_iteration"]
        self._tracking.log_metrics(self._trial_runs[trial], result, step)

    def log_trial_end(self, trial, failed: bool = False) -> None:
        run_id = self._trial_runs[trial]
        client = self._tracking.client()
        if self.should_save_artifact:
            client.log_artifacts(run_id=run_id, local_dir=trial.local_path)
        if self.log_params_on_trial_end:
            self._tracking.log_params(run_id, trial.config)
        client.set_terminated(run_id=run_id, status="FAILED" if failed else "FINISHED")
