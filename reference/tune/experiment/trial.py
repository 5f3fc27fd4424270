"""`Trial`: one config of an experiment, run as one function process at a time.

Its status moves PENDING -> RUNNING -> (PAUSED -> PENDING -> RUNNING)* -> TERMINATED | ERROR;
a failed process is restarted (status PENDING again) while the FailureConfig allows. It keeps
every result the trial reported (`results`), the checkpoints on storage (`checkpoints`, oldest
first) and, for the next start, `restore_from`: the checkpoint to resume from (its own latest,
or another trial's after a PopulationBasedTraining exploit).
"""

from __future__ import annotations

import os
from typing import Any, Optional

from reference.train import Checkpoint


class Trial:
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    def __init__(self, trainable_name: str, trial_id: str, config: dict, *,
                 experiment_tag: str = "", bundles: Optional[list] = None,
                 experiment_path: str = "", dir_name: str = ""):
        self.trainable_name = trainable_name
        self.trial_id = trial_id
        self.config = config
        self.experiment_tag = experiment_tag
        #: the trial's resource bundles; its process runs in the first
        self.bundles = [dict(b) for b in (bundles or [{"CPU": 1.0}])]
        self.experiment_path = experiment_path
        self.dir_name = dir_name
        self.status = Trial.PENDING
        self.results: list[dict] = []
        self.last_result: dict = {}
        self.checkpoints: list[tuple[Checkpoint, dict]] = []
        self.restore_from: Optional[Checkpoint] = None
        self.num_failures = 0
        self.error: Optional[BaseException] = None
        self.error_text: Optional[str] = None
        self.checkpoint_index = 0      # the next checkpoint folder's number
        self.iteration = 0             # training_iteration of the last result kept
        self.time_total_s = 0.0
        #: the searched leaves of the config ("a/b" -> value), as TensorBoard's hparams
        self.evaluated_params: dict = {}

    # -- what schedulers and searchers use ------------------------------------------------
    @property
    def checkpoint(self) -> Optional[Checkpoint]:
        """The latest checkpoint the trial reported (None before its first)."""
        return self.checkpoints[-1][0] if self.checkpoints else None

    @property
    def path(self) -> str:
        return os.path.join(self.experiment_path, self.dir_name)

    @property
    def local_path(self) -> str:
        return self.path

    def set_config(self, config: dict) -> None:
        self.config = config

    def set_experiment_tag(self, experiment_tag: str) -> None:
        self.experiment_tag = experiment_tag

    def is_finished(self) -> bool:
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    @property
    def name(self) -> str:
        return f"{self.trainable_name}_{self.trial_id}"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Trial({self.name}, {self.status})"

    # -- experiment state (Tuner.restore) ---------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "trainable_name": self.trainable_name, "trial_id": self.trial_id,
            "config": self.config, "experiment_tag": self.experiment_tag,
            "bundles": self.bundles, "dir_name": self.dir_name, "status": self.status,
            "results": self.results, "last_result": self.last_result,
            "checkpoints": [(os.path.basename(c.path), m) for c, m in self.checkpoints],
            "restore_from": self.restore_from.path if self.restore_from else None,
            "num_failures": self.num_failures, "error_text": self.error_text,
            "checkpoint_index": self.checkpoint_index, "iteration": self.iteration,
            "time_total_s": self.time_total_s, "evaluated_params": self.evaluated_params,
        }

    @classmethod
    def from_state(cls, state: dict, experiment_path: str) -> Trial:
        trial = cls(state["trainable_name"], state["trial_id"], state["config"],
                    experiment_tag=state["experiment_tag"], bundles=state["bundles"],
                    experiment_path=experiment_path, dir_name=state["dir_name"])
        trial.status = state["status"]
        trial.results = state["results"]
        trial.last_result = state["last_result"]
        trial.checkpoints = [(Checkpoint(os.path.join(trial.path, name)), metrics)
                             for name, metrics in state["checkpoints"]]
        if state["restore_from"]:
            trial.restore_from = Checkpoint(state["restore_from"])
        trial.num_failures = state["num_failures"]
        trial.error_text = state["error_text"]
        trial.checkpoint_index = state["checkpoint_index"]
        trial.iteration = state["iteration"]
        trial.time_total_s = state["time_total_s"]
        trial.evaluated_params = state.get("evaluated_params", {})
        return trial
