"""Weights & Biases for Train workers and Tune trials, as `ray.air.integrations.wandb`
(Ray 2.60).

- `setup_wandb(config, api_key, api_key_file, rank_zero_only, **kwargs)`, called in a
  training function or a trial: `wandb.init` with the run id, name and group defaulting to
  the trial's id, name and experiment (kwargs `trial_id`, `trial_name`, `group` and any
  `wandb.init` argument override them), `resume=True`, the config cleaned for W&B; returns
  the run. In a Train worker whose world rank is not 0 it returns `wandb.init(mode=
  "disabled")` (unless `rank_zero_only=False`), as Ray's docs promise. (Ray 2.60 itself
  reads the rank from Train's V1 session, which a V2 worker has not: there every rank logs.)
- `WandbLoggerCallback(project, group, api_key_file, api_key, excludes, log_config,
  upload_checkpoints, save_checkpoints, upload_timeout, video_kwargs, image_kwargs,
  **kwargs)`, a Tune logger: a W&B run per trial, started in a process of its own (W&B
  keeps one run per process) in the trial's folder, where offline runs land; results are
  handed to it through a queue and a feeder thread, so a slow tracker never stalls the
  trial loop. Each result is flattened with "/"; `done`, `should_checkpoint`, `excludes`
  and (unless `log_config`) `config` are left out, Ray's AUTO_CONFIG_KEYS go to the run's
  config, values W&B cannot chart are dropped; the step is `training_iteration`.
- The API key: `api_key` or the first line of `api_key_file` (both: ValueError), else
  WANDB_API_KEY, else a logged-in W&B, else the WANDB_SETUP_API_KEY_HOOK function; none:
  Ray's ValueError. Not needed with WANDB_MODE offline or disabled. The project: the
  argument, else WANDB_PROJECT_NAME (WANDB_POPULATE_RUN_LOCATION_HOOK may set it and
  WANDB_GROUP_NAME), else Ray's ValueError naming the variable. WANDB_PROCESS_RUN_INFO_HOOK
  is called with each run.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
import warnings
from numbers import Number
from typing import Any, Optional

from reference.tune.logger.logger import LoggerCallback

logger = logging.getLogger(__name__)

WANDB_ENV_VAR = "WANDB_API_KEY"
WANDB_PROJECT_ENV_VAR = "WANDB_PROJECT_NAME"
WANDB_GROUP_ENV_VAR = "WANDB_GROUP_NAME"
WANDB_MODE_ENV_VAR = "WANDB_MODE"
WANDB_SETUP_API_KEY_HOOK = "WANDB_SETUP_API_KEY_HOOK"
WANDB_POPULATE_RUN_LOCATION_HOOK = "WANDB_POPULATE_RUN_LOCATION_HOOK"
WANDB_PROCESS_RUN_INFO_HOOK = "WANDB_PROCESS_RUN_INFO_HOOK"
MISSING = "Wandb was not found - please install with `pip install wandb`"
#: seconds `on_experiment_end` waits for the runs to finish (Ray's default sync timeout)
DEFAULT_UPLOAD_TIMEOUT = 1800


def _wandb():
    try:
        import wandb
    except ImportError:
        return None
    return wandb


def _load(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _call_hook(var: str, *args) -> Any:
    try:
        return _load(os.environ[var])(*args)
    except Exception as exc:  # noqa: BLE001 - a broken hook is logged, as Ray does
        logger.exception("Error executing %s (%s): %s", var, os.environ[var], exc)
        return None


def _set_api_key(api_key_file: Optional[str], api_key: Optional[str]) -> None:
    if os.environ.get(WANDB_MODE_ENV_VAR) in {"offline", "disabled"}:
        return
    if api_key_file:
        if api_key:
            raise ValueError("Both WandB `api_key_file` and `api_key` set.")
        with open(os.path.expanduser(api_key_file)) as f:
            api_key = f.readline().strip()
    if not api_key and not os.environ.get(WANDB_ENV_VAR):
        wandb = _wandb()
        try:
            wandb.ensure_configured()
            if wandb.api.api_key:
                return  # logged in with `wandb login`
        except AttributeError:
            pass
        if WANDB_SETUP_API_KEY_HOOK in os.environ:
            api_key = _call_hook(WANDB_SETUP_API_KEY_HOOK)
    if api_key:
        os.environ[WANDB_ENV_VAR] = api_key
    elif not os.environ.get(WANDB_ENV_VAR):
        raise ValueError(
            f"No WandB API key found. Either set the {WANDB_ENV_VAR} environment variable, "
            "pass `api_key` or `api_key_file` to the`WandbLoggerCallback` class as "
            "arguments, or run `wandb login` from the command line")


def _project(project: Optional[str]) -> Optional[str]:
    if (not project and not os.environ.get(WANDB_PROJECT_ENV_VAR)
            and os.environ.get(WANDB_POPULATE_RUN_LOCATION_HOOK)):
        _call_hook(WANDB_POPULATE_RUN_LOCATION_HOOK)
    return project or os.environ.get(WANDB_PROJECT_ENV_VAR)


def allowed(value) -> bool:
    """A value W&B charts: a number, a one-element numeric array, a W&B media value or a
    non-empty sequence of them."""
    import numpy as np
    from wandb.sdk.data_types.base_types.wb_value import WBValue

    if isinstance(value, np.ndarray) and value.size == 1:
        return isinstance(value.item(), Number)
    if isinstance(value, (list, tuple)) and value:
        return isinstance(value[0], WBValue)
    return isinstance(value, (Number, WBValue))


def clean(value, video_kwargs: Optional[dict] = None, image_kwargs: Optional[dict] = None):
    """A value made loggable as Ray's callback makes it: containers cleaned item by item,
    3-d arrays as images, 4-d as images, 5-d as videos, what neither JSON nor pickle takes
    as its str (or the int or float that str reads as)."""
    import numpy as np
    from wandb import Image, Video

    video_kwargs, image_kwargs = video_kwargs or {}, image_kwargs or {}
    again = lambda v: clean(v, video_kwargs, image_kwargs)  # noqa: E731
    if isinstance(value, dict):
        return {k: again(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return [again(v) for v in value]
    if isinstance(value, tuple):
        return tuple(again(v) for v in value)
    if isinstance(value, np.ndarray) and value.ndim in (3, 4, 5):
        media, kwargs = (Video, video_kwargs) if value.ndim == 5 else (Image, image_kwargs)
        if value.ndim == 3:
            return Image(value, **image_kwargs)
        if value.shape[0] > 1:
            return [media(v, **kwargs) for v in value]
        return media(value[0], **kwargs)
    if allowed(value):
        return value
    try:
        from wandb.util import json_dumps_safer

        json_dumps_safer(value)
        pickle.dumps(value)
        return value
    except Exception:  # noqa: BLE001 - anything unserializable falls back to its str
        text = str(value)
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text


def _context(rank_zero_only: bool):
    """(trial id, trial name, experiment) defaults, or None for a rank that logs nothing."""
    from reference import train, tune

    try:
        context = tune.get_context()
        return (context.get_trial_id(), context.get_trial_name(),
                context.get_experiment_name())
    except RuntimeError:
        pass
    try:
        context = train.get_context()
    except RuntimeError:
        return None, None, None  # on the driver
    if rank_zero_only and context.get_world_rank() != 0:
        return None
    return None, None, context.get_experiment_name()


def setup_wandb(config: Optional[dict] = None, api_key: Optional[str] = None,
                api_key_file: Optional[str] = None, rank_zero_only: bool = True, **kwargs):
    wandb = kwargs.pop("_wandb", None) or _wandb()
    if wandb is None:
        raise RuntimeError(MISSING)
    defaults = _context(rank_zero_only)
    if defaults is None:
        return wandb.init(mode="disabled")
    trial_id = kwargs.pop("trial_id", None) or defaults[0]
    trial_name = kwargs.pop("trial_name", None) or defaults[1]
    group = kwargs.pop("group", None) or defaults[2] or os.environ.get(WANDB_GROUP_ENV_VAR)
    _set_api_key(api_key_file, api_key)
    init = dict(id=trial_id, name=trial_name, resume=True, reinit=True,
                allow_val_change=True, config=clean(dict(config or {})),
                project=_project(kwargs.pop("project", None)), group=group)
    init.update(kwargs)
    os.environ["WANDB_START_METHOD"] = "fork"
    run = wandb.init(**init)
    if WANDB_PROCESS_RUN_INFO_HOOK in os.environ:
        _call_hook(WANDB_PROCESS_RUN_INFO_HOOK, run)
    return run


class _TrialRun:
    """A trial's W&B run: its logging process and the thread that feeds it."""

    def __init__(self, logdir: str, exclude: list, to_config: list, init: dict):
        os.makedirs(logdir, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reference.air.integrations._wandb_run"],
            stdin=subprocess.PIPE, cwd=logdir, start_new_session=True)
        self.items: queue.Queue = queue.Queue()
        self.items.put(("start", (logdir, exclude, to_config, init)))
        self.feeder = threading.Thread(target=self._feed, daemon=True,
                                       name="wandb-feeder")
        self.feeder.start()

    def _feed(self) -> None:
        try:
            while True:
                item = self.items.get()
                pickle.dump(item, self.process.stdin)
                self.process.stdin.flush()
                if item[0] == "end":
                    break
        except (BrokenPipeError, OSError) as exc:
            logger.warning("the W&B logging process of %s is gone: %s", item, exc)
        finally:
            self.process.stdin.close()

    def put(self, kind: str, content=None) -> None:
        self.items.put((kind, content))

    def finish(self, timeout_s: float) -> None:
        """Waits up to `timeout_s` for the run to finish; kills it after that."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class WandbLoggerCallback(LoggerCallback):
    _exclude_results = ["done", "should_checkpoint"]
    AUTO_CONFIG_KEYS = ["trial_id", "experiment_tag", "node_ip", "experiment_id",
                        "hostname", "pid", "date"]

    def __init__(self, project: Optional[str] = None, group: Optional[str] = None,
                 api_key_file: Optional[str] = None, api_key: Optional[str] = None,
                 excludes: Optional[list] = None, log_config: bool = False,
                 upload_checkpoints: bool = False, save_checkpoints: bool = False,
                 upload_timeout: int = DEFAULT_UPLOAD_TIMEOUT,
                 video_kwargs: Optional[dict] = None, image_kwargs: Optional[dict] = None,
                 **kwargs):
        if _wandb() is None:
            raise RuntimeError(MISSING)
        if save_checkpoints:
            warnings.warn("`save_checkpoints` is deprecated. Use `upload_checkpoints` "
                          "instead.", DeprecationWarning, stacklevel=2)
            upload_checkpoints = save_checkpoints
        self.project, self.group = project, group
        self.api_key_path, self.api_key = api_key_file, api_key
        self.excludes = excludes or []
        self.log_config, self.upload_checkpoints = log_config, upload_checkpoints
        self._upload_timeout = upload_timeout
        self.video_kwargs, self.image_kwargs = video_kwargs or {}, image_kwargs or {}
        self.kwargs = kwargs
        self._runs: dict = {}

    def setup(self, *args, **kwargs) -> None:
        self.api_key_file = (os.path.expanduser(self.api_key_path) if self.api_key_path
                             else None)
        _set_api_key(self.api_key_file, self.api_key)
        self.project = _project(self.project)
        if not self.project:
            raise ValueError("Please pass the project name as argument or through the "
                             f"{WANDB_PROJECT_ENV_VAR} environment variable.")
        if not self.group and os.environ.get(WANDB_GROUP_ENV_VAR):
            self.group = os.environ.get(WANDB_GROUP_ENV_VAR)

    def log_trial_start(self, trial) -> None:
        if trial in self._runs:
            return
        config = {k: v for k, v in clean(dict(trial.config)).items()
                  if k != "callbacks" and k not in self.excludes}
        exclude = self._exclude_results + self.excludes + ([] if self.log_config
                                                            else ["config"])
        experiment = os.path.basename(os.path.dirname(trial.local_path))
        init = dict(id=trial.trial_id, name=str(trial), resume=False, reinit=True,
                    allow_val_change=True, group=self.group or experiment,
                    project=self.project, config=config, **self.kwargs)
        self._runs[trial] = _TrialRun(trial.local_path, exclude, self.AUTO_CONFIG_KEYS, init)

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        if trial not in self._runs:
            self.log_trial_start(trial)
        self._runs[trial].put("result", clean(result, self.video_kwargs, self.image_kwargs))

    def log_trial_save(self, trial) -> None:
        checkpoint = trial.checkpoint
        if self.upload_checkpoints and checkpoint is not None and trial in self._runs:
            import pyarrow.fs

            if isinstance(checkpoint.filesystem, pyarrow.fs.LocalFileSystem):
                self._runs[trial].put("checkpoint", checkpoint.path)

    def log_trial_end(self, trial, failed: bool = False) -> None:
        if trial in self._runs:
            self._runs[trial].put("end")
        for done in [t for t, run in self._runs.items() if run.process.poll() is not None]:
            del self._runs[done]

    def on_experiment_end(self, trials: list, **info) -> None:
        """Waits (up to `upload_timeout` in all) for the runs' `wandb.finish`."""
        import time

        deadline = time.monotonic() + self._upload_timeout
        for trial, run in list(self._runs.items()):
            run.put("end")
            run.finish(max(0.0, deadline - time.monotonic()))
            del self._runs[trial]

    def __del__(self):
        for run in list(getattr(self, "_runs", {}).values()):
            run.put("end")
            run.finish(2)
