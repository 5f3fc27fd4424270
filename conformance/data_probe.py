"""Training functions of the Ray Data checks (clauses `data.*`).

Every row of the probe's datasets has an `id` column (unique in the dataset) and a float
column `x`, so the rows a rank saw are a set of ids and disjointness is checkable. The
function `data_probe` journals, per rank, what `get_dataset_shard` handed out and what each
pass over it yielded; `config["mode"]` picks the run:

- "main" (a 2-worker TorchTrainer, `DataConfig(datasets_to_split=["train"])`): rank 0 waits
  until every other rank has entered `get_dataset_shard("train")`, sleeps BARRIER_DELAY_S,
  then calls it itself (the barrier check); every rank then makes EPOCHS passes over its
  "train" shard (iter_rows, iter_batches, iter_torch_batches, materialize().to_pandas()),
  reads the unsplit "valid" dataset and asks for an unknown name and for no name;
- "restart" (a DataParallelTrainer with FailureConfig(max_failures=1), the default
  DataConfig, "train" given as a callable `MakeDataset`): every rank reads both shards;
  on attempt 0 rank 0 then raises, once every rank has journaled its rows;
- "order" (a 2-worker DataParallelTrainer, the default DataConfig): rank 0 gets its "train"
  shard and reports before rank 1 asks for its own; rank 1 reports first, then gets it;
- "local" (num_workers=0): what `get_dataset_shard` returns in local mode for each name
  in `config["names"]`, for an unknown name and for no name.

`MakeDataset` journals a `resolved` event each time the implementation calls it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import time

from conformance.probe import InjectedFault, Journal

#: seconds rank 0 waits, once every other rank is inside get_dataset_shard, before its call
BARRIER_DELAY_S = 1.5
BATCH = 4
#: the passes every rank makes over its "train" shard in the main run, in order
EPOCHS = ("iter_rows", "iter_batches", "iter_torch_batches", "materialize")
UNKNOWN = "no-such-dataset"


def items(rows: int, first: int = 0) -> list[dict]:
    """The rows of a probe dataset: ids first .. first + rows - 1."""
    return [{"id": first + i, "x": float(first + i) / 2} for i in range(rows)]


@dataclasses.dataclass
class MakeDataset:
    """A dataset given to the trainer as a callable; journals each call."""

    data_module: str
    journal: str
    rows: int
    first: int = 0

    def __call__(self):
        Journal(self.journal).record(ev="resolved", pid=os.getpid(), wall=time.time())
        data = importlib.import_module(self.data_module)
        return data.from_items(items(self.rows, self.first))


def _ids(rows) -> list[int]:
    return [int(row["id"]) for row in rows]


def _error(fn) -> list | None:
    """[type name, message] of what fn() raised (None: it returned)."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - what was raised is the observation
        return [type(exc).__name__, exc.args[0] if len(exc.args) == 1 else str(exc)]
    return None


def _wait(journal: Journal, done, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done(journal.events_so_far()):
            return True
        time.sleep(0.05)
    return False


def data_probe(config: dict) -> None:
    train = importlib.import_module(config["train_module"])
    data = importlib.import_module(config["data_module"])
    journal = Journal(config["journal"])
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    attempt = journal.next_attempt(rank)
    journal.record(ev="data_start", rank=rank, world=world, attempt=attempt, pid=os.getpid())
    {"main": _main, "restart": _restart, "local": _local, "order": _order}[config["mode"]](
        train, data, journal, rank, world, attempt, config)


# ------------------------------------------------------------------------ main
def _main(train, data, journal: Journal, rank: int, world: int, attempt: int,
          config: dict) -> None:
    import torch

    if rank == 0:
        others = set(range(1, world))
        waited = _wait(journal, lambda evs: others <= {e["rank"] for e in evs
                                                        if e.get("ev") == "shard_call"})
        time.sleep(BARRIER_DELAY_S)
    else:
        waited = True
    called = time.time()
    journal.record(ev="shard_call", rank=rank, wall=called, waited=waited)
    shard = train.get_dataset_shard("train")
    returned = time.time()
    journal.record(ev="shard", rank=rank, called=called, returned=returned,
                   type=type(shard).__name__,
                   is_iterator=isinstance(shard, data.DataIterator))

    passes: dict = {}
    rows = list(shard.iter_rows())
    passes["iter_rows"] = {"ids": _ids(rows),
                           "keys": sorted(rows[0]) if rows else None}
    batches = list(shard.iter_batches(batch_size=BATCH, batch_format="numpy"))
    passes["iter_batches"] = {"ids": [int(i) for b in batches for i in b["id"]],
                              "sizes": [len(b["id"]) for b in batches],
                              "keys": sorted(batches[0]) if batches else None}
    dtypes = {"id": torch.int32, "x": torch.float64}
    tensors = list(shard.iter_torch_batches(batch_size=BATCH, dtypes=dtypes))
    passes["iter_torch_batches"] = {
        "ids": [int(i) for b in tensors for i in b["id"].tolist()],
        "sizes": [len(b["id"]) for b in tensors],
        "batch_types": sorted({type(b).__name__ for b in tensors}),
        "columns": sorted({f"{k}:{type(v).__name__}:{v.dtype}:{v.device}"
                           for b in tensors for k, v in b.items()}),
    }
    frame = shard.materialize().to_pandas()
    passes["materialize"] = {"ids": [int(i) for i in frame["id"]],
                             "columns": sorted(frame.columns)}
    again = train.get_dataset_shard("train")
    journal.record(ev="train_passes", rank=rank, passes=passes, same_object=again is shard)

    valid = train.get_dataset_shard("valid")
    seen = {"type": type(valid).__name__, "is_iterator": isinstance(valid, data.DataIterator),
            "ids": _ids(valid.iter_rows())}
    tensors = list(valid.iter_torch_batches(batch_size=BATCH, dtypes=torch.float32))
    seen["torch_columns"] = sorted({f"{k}:{v.dtype}" for b in tensors for k, v in b.items()})
    seen["torch_sizes"] = [len(b["id"]) for b in tensors]
    seen["collate_and_dtypes"] = _error(lambda: valid.iter_torch_batches(
        collate_fn=lambda batch: batch, dtypes=torch.float32))
    seen["unknown"] = _error(lambda: train.get_dataset_shard(UNKNOWN))
    seen["no_name"] = _error(lambda: train.get_dataset_shard())
    journal.record(ev="valid", rank=rank, **seen)


# ------------------------------------------------------------------------ restart
def _restart(train, data, journal: Journal, rank: int, world: int, attempt: int,
             config: dict) -> None:
    shards = {name: _ids(train.get_dataset_shard(name).iter_rows())
              for name in ("train", "eval")}
    journal.record(ev="restart_rows", rank=rank, world=world, attempt=attempt, **shards)
    if attempt == 0 and rank == 0:
        everyone = set(range(world))
        _wait(journal, lambda evs: everyone <= {e["rank"] for e in evs
                                                if e.get("ev") == "restart_rows"
                                                and e["attempt"] == 0})
        journal.record(ev="raise", rank=rank, attempt=attempt)
        raise InjectedFault("data_probe: rank 0 raises on attempt 0 after reading its shards")


# ------------------------------------------------------------------------ order
def _order(train, data, journal: Journal, rank: int, world: int, attempt: int,
           config: dict) -> None:
    if rank == 0:
        shard = train.get_dataset_shard("train")
        journal.record(ev="opened", rank=rank)
        train.report({"rank": rank})
    else:
        _wait(journal, lambda evs: any(e.get("ev") == "opened" for e in evs))
        train.report({"rank": rank})
        shard = train.get_dataset_shard("train")
    journal.record(ev="order_rows", rank=rank, ids=_ids(shard.iter_rows()))


# ------------------------------------------------------------------------ local
def _local(train, data, journal: Journal, rank: int, world: int, attempt: int,
           config: dict) -> None:
    seen: dict = {}
    for name in config["names"]:
        shard = train.get_dataset_shard(name)
        seen[name] = {"type": type(shard).__name__,
                      "is_dataset": isinstance(shard, data.Dataset),
                      "is_iterator": isinstance(shard, data.DataIterator),
                      "ids": _ids(shard.iter_rows())}
    seen["unknown"] = _error(lambda: train.get_dataset_shard(UNKNOWN))
    seen["no_name"] = _error(lambda: train.get_dataset_shard())
    journal.record(ev="local", rank=rank, world=world, pid=os.getpid(), **seen)
