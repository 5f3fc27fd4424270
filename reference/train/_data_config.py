"""`DataConfig`: how the trainer's `datasets=` reach the workers.

At every worker-group start (the first one, after a restart, after an elastic resize) the
controller calls `configure()` with the datasets (callables resolved anew) and the group's
size; what it returns, one dict of name -> `DataIterator` per rank, is what
`get_dataset_shard(name)` gives on that rank. Split datasets become
`streaming_split(world_size, equal=True)` shards: disjoint, `count() // world_size` rows
each; the others give every rank an iterator over the whole dataset. A subclass may
override `configure()`, as in Ray.
"""

from __future__ import annotations

import copy


class DataConfig:
    def __init__(self, datasets_to_split="all", execution_options=None,
                 enable_shard_locality: bool = True):
        if isinstance(datasets_to_split, list) or datasets_to_split == "all":
            self._datasets_to_split = datasets_to_split
        else:  # Ray's exact message
            raise TypeError(
                "`datasets_to_split` should be a 'all' or a list of strings of dataset names. "
                f"Received {type(datasets_to_split).__name__} with value {datasets_to_split}.")
        self._user_execution_options = execution_options
        self._enable_shard_locality = enable_shard_locality

    def _execution_options(self, name: str):
        chosen = self._user_execution_options
        if isinstance(chosen, dict):
            chosen = chosen.get(name)
        return copy.deepcopy(chosen or self.default_ingest_options())

    def configure(self, datasets: dict, world_size: int, worker_handles,
                  worker_node_ids, **kwargs) -> list[dict]:
        """One dict of dataset name -> DataIterator per rank."""
        output: list[dict] = [{} for _ in range(world_size)]
        split = set(datasets) if self._datasets_to_split == "all" else \
            set(self._datasets_to_split)
        hints = worker_node_ids if self._enable_shard_locality else None
        for name, ds in datasets.items():
            if getattr(ds, "name", None) is None and hasattr(ds, "set_name"):
                ds.set_name(name)
            ds = ds.copy(ds)
            ds.context.execution_options = self._execution_options(name)
            if name in split:
                for rank, shard in enumerate(ds.streaming_split(world_size, equal=True,
                                                                locality_hints=hints)):
                    output[rank][name] = shard
            else:
                for rank in range(world_size):
                    output[rank][name] = ds.iterator()
        return output

    @staticmethod
    def default_ingest_options():
        """The driver's current execution options, as Ray's ingest starts from."""
        from reference.data import DataContext

        return copy.deepcopy(DataContext.get_current().execution_options)

