"""TrainContext: what a training function may ask about the run it is part of."""

from __future__ import annotations

import dataclasses
from typing import Any

_DEPRECATED = (
    "`TrainContext.{name}` is deprecated and unavailable in this version of the Train API; "
    "{hint}"
)


@dataclasses.dataclass(frozen=True)
class TrainContext:
    """Ranks and names of the current worker, as `reference.train.get_context()` returns."""

    experiment_name: str
    world_size: int = 1
    world_rank: int = 0
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    storage: Any = None

    def get_experiment_name(self) -> str:
        return self.experiment_name

    def get_world_size(self) -> int:
        return self.world_size

    def get_world_rank(self) -> int:
        return self.world_rank

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_world_size(self) -> int:
        return self.local_world_size

    def get_node_rank(self) -> int:
        return self.node_rank

    def get_storage(self):
        """The run's StorageContext (None in local mode, which persists nothing)."""
        return self.storage

    # Deprecated accessors raise, as the Train API does, so old code fails loudly.
    def get_metadata(self):
        raise DeprecationWarning(_DEPRECATED.format(
            name="get_metadata", hint="pass metadata through `train_loop_config` instead."))

    def get_trial_name(self):
        raise DeprecationWarning(_DEPRECATED.format(
            name="get_trial_name", hint="use `get_experiment_name()`."))

    def get_trial_id(self):
        raise DeprecationWarning(_DEPRECATED.format(
            name="get_trial_id", hint="use `get_experiment_name()`."))

    def get_trial_resources(self):
        raise DeprecationWarning(_DEPRECATED.format(
            name="get_trial_resources", hint="read `ScalingConfig` instead."))

    def get_trial_dir(self):
        raise DeprecationWarning(_DEPRECATED.format(
            name="get_trial_dir", hint="use `get_storage().experiment_fs_path`."))
