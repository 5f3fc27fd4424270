"""`JsonLoggerCallback`: each trial's config as `params.json` and `params.pkl` when it
starts, and its results as lines of `result.json` (one JSON object per result, appended).

`params.json` is indented and key-sorted; numpy values and anything else JSON cannot hold
are written as Ray's loggers write them (`logger.json_default`). `params.pkl` is the config
as cloudpickle writes it (a config that cannot be pickled has none). Loading a run's
results from its folder (`ResultGrid`, `Result.from_path`) reads these files.
"""

from __future__ import annotations

import json
import logging
import os

from reference.tune.logger.logger import LoggerCallback, json_default

logger = logging.getLogger(__name__)

RESULT_FILE, PARAMS_FILE, PARAMS_PICKLE_FILE = "result.json", "params.json", "params.pkl"


class JsonLoggerCallback(LoggerCallback):
    _SAVED_FILE_TEMPLATES = [RESULT_FILE, PARAMS_FILE, PARAMS_PICKLE_FILE]

    def __init__(self):
        self._configs: dict = {}
        self._files: dict = {}

    def log_trial_start(self, trial) -> None:
        if trial in self._files:
            self._files[trial].close()
        os.makedirs(trial.local_path, exist_ok=True)
        self.update_config(trial, trial.config)
        self._files[trial] = open(os.path.join(trial.local_path, RESULT_FILE), "a")

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        if trial not in self._files:
            self.log_trial_start(trial)
        out = self._files[trial]
        out.write(json.dumps(result, default=json_default) + "\n")
        out.flush()

    def log_trial_end(self, trial, failed: bool = False) -> None:
        if trial in self._files:
            self._files.pop(trial).close()

    def update_config(self, trial, config: dict) -> None:
        self._configs[trial] = config
        with open(os.path.join(trial.local_path, PARAMS_FILE), "w") as f:
            json.dump(config, f, indent=2, sort_keys=True, default=json_default)
        import cloudpickle

        pkl = os.path.join(trial.local_path, PARAMS_PICKLE_FILE)
        try:
            with open(pkl, "wb") as f:
                cloudpickle.dump(config, f)
        except Exception:  # noqa: BLE001 - an unpicklable config only lacks params.pkl
            os.remove(pkl)  # nor does a half-written one stay
            logger.debug("the config of %s cannot be pickled", trial)
