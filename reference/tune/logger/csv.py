"""`CSVLoggerCallback`: each trial's results as rows of `<trial>/progress.csv`.

A result is flattened ({"a": {"b": 1}} -> column "a/b") without its `config`. The columns
are the keys of the first result the logger sees for the trial (later keys are dropped,
missing ones left empty); a file that already holds rows (a restored trial) is appended to
without a second header, as in Ray.
"""

from __future__ import annotations

import csv
import os

from reference.tune.logger.logger import LoggerCallback, flatten_dict

PROGRESS_FILE = "progress.csv"


class CSVLoggerCallback(LoggerCallback):
    _SAVED_FILE_TEMPLATES = [PROGRESS_FILE]

    def __init__(self):
        self._files: dict = {}    # trial -> open file
        self._writers: dict = {}  # trial -> csv.DictWriter (None until the first result)
        self._continue: dict = {}  # trial -> the file held rows when opened

    def _setup_trial(self, trial) -> None:
        if trial in self._files:
            self._files[trial].close()
        os.makedirs(trial.local_path, exist_ok=True)
        path = os.path.join(trial.local_path, PROGRESS_FILE)
        self._continue[trial] = os.path.exists(path) and os.path.getsize(path) > 0
        self._files[trial] = open(path, "a", newline="")
        self._writers[trial] = None

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        if trial not in self._files:
            self._setup_trial(trial)
        row = flatten_dict({k: v for k, v in result.items() if k != "config"})
        writer = self._writers[trial]
        if writer is None:
            writer = self._writers[trial] = csv.DictWriter(self._files[trial], list(row))
            if not self._continue[trial]:
                writer.writeheader()
        writer.writerow({k: v for k, v in row.items() if k in writer.fieldnames})
        self._files[trial].flush()

    def log_trial_end(self, trial, failed: bool = False) -> None:
        if trial not in self._files:
            return
        self._files.pop(trial).close()
        self._writers.pop(trial, None)
