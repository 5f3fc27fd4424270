"""Ray Data as Train uses it (clauses `data.*`).

The training function is `conformance.data_probe.data_probe`; every dataset row has an `id`
column, unique in its dataset, so what each rank read is a set of ids. Three fits (local
mode's two are `check_data_local`'s):

- "main": TorchTrainer(num_workers=2), datasets {"train": from_items(21 rows), "valid":
  from_items(6 rows)}, DataConfig(datasets_to_split=["train"]); rank 0 enters
  get_dataset_shard("train") BARRIER_DELAY_S after rank 1 (the barrier check), then every
  rank makes four passes over its shard and reads "valid" whole;
- "restart": DataParallelTrainer(num_workers=2), FailureConfig(max_failures=1), the default
  DataConfig, {"train": a callable building from_items(23 rows), "eval": range(11)}; rank
  0 raises on attempt 0 once every rank has read its shards;
- "order": DataParallelTrainer(num_workers=2), {"train": from_items(10 rows)}; rank 0 gets its
  shard and reports before rank 1 asks for its own.
"""

from __future__ import annotations

import inspect
import os

import pytest

from conformance import assertions, data_probe
from conformance.catalogue import clause
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, shared, workspace

MAIN = {"workers": 2, "train": 21, "valid": 6}
RESTART = {"workers": 2, "train": 23, "eval": 11}
ORDER_ROWS = 10  # even: the default DataConfig splits equally, dropping a remainder
VALID_FIRST = 1000
TYPE_ERROR = ("`datasets_to_split` should be a 'all' or a list of strings of dataset names. "
              "Received {type} with value {value}.")
KEY_ERROR = ("Dataset shard for '{name}' not found. Please ensure that the dataset is passed "
             "through the Trainer `datasets` argument.")
#: Ray's message; the clause asks only for an AssertionError that names the dataset
COLLATE_ERROR = ("collate_fn cannot be used with dtypes. You should manually convert the "
                 "output Torch tensors to the desired dtype inside collate_fn.")


def _fit(impl, mode: str, cls, workers: int, datasets, **kwargs):
    """(outcome, journal) of one fit running the data probe; `datasets(journal folder)`
    builds the trainer's datasets."""
    t = impl.train
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    run_config = dict(name=f"data-{mode}", storage_path=os.path.join(folder, "s"))
    if mode == "restart":
        run_config["failure_config"] = t.FailureConfig(max_failures=1)
    given = datasets(journal)
    config = {"train_module": t.__name__, "data_module": impl.data.__name__,
              "journal": journal, "mode": mode.split("-")[0], "names": sorted(given or {})}
    factory = TrainerFactory(cls, dict(
        train_loop_per_worker=data_probe.data_probe, train_loop_config=config,
        scaling_config=t.ScalingConfig(num_workers=workers), run_config=t.RunConfig(**run_config),
        datasets=given, **kwargs))
    outcome = impl.fit(factory, max(impl.fit_deadline_s, 120.0))
    return outcome, Journal(journal)


def _main_run(impl):
    def build(impl):
        pytest.importorskip("torch")
        d, t = impl.data, impl.train
        outcome, journal = _fit(
            impl, "main", impl.framework("torch").TorchTrainer, MAIN["workers"],
            lambda j: {"train": d.from_items(data_probe.items(MAIN["train"])),
                       "valid": d.from_items(data_probe.items(MAIN["valid"], VALID_FIRST))},
            dataset_config=t.DataConfig(datasets_to_split=["train"]))
        setting = (f"{impl.name}: TorchTrainer(num_workers={MAIN['workers']}), datasets "
                   f"{{'train': from_items({MAIN['train']} rows), 'valid': from_items("
                   f"{MAIN['valid']} rows)}}, DataConfig(datasets_to_split=['train'])")
        return outcome, journal, setting

    return shared(impl, "data-main", build)


def _restart_run(impl):
    def build(impl):
        d = impl.data
        outcome, journal = _fit(
            impl, "restart", impl.DataParallelTrainer, RESTART["workers"],
            lambda j: {"train": data_probe.MakeDataset(d.__name__, j, RESTART["train"]),
                       "eval": d.range(RESTART["eval"])})
        setting = (f"{impl.name}: DataParallelTrainer(num_workers={RESTART['workers']}), "
                   f"FailureConfig(max_failures=1), datasets {{'train': a callable returning "
                   f"from_items({RESTART['train']} rows), 'eval': range({RESTART['eval']})}}, "
                   "default DataConfig; rank 0 raises on attempt 0 after reading its shards")
        return outcome, journal, setting

    return shared(impl, "data-restart", build)


def _by_rank(journal: Journal, ev: str, attempt: int | None = None) -> dict:
    rows = journal.events(ev)
    if attempt is not None:
        rows = [e for e in rows if e["attempt"] == attempt]
    return {e["rank"]: e for e in rows}


def _equal_split(shards: dict, rows: int, world: int, what: str, setting: str) -> None:
    """Shards (rank -> ids) of one pass over a split dataset of ids 0..rows-1 (or the
    probe's ids): every rank floor(rows / world) distinct ids, no id on two ranks."""
    __tracebackhide__ = True
    assertions.equal(sorted(shards), list(range(world)), f"{what}: ranks that read", setting)
    each = rows // world
    assertions.equal({r: len(ids) for r, ids in shards.items()}, dict.fromkeys(range(world), each),
                     f"{what}: rows per rank (floor({rows} / {world}))", setting)
    union = [i for ids in shards.values() for i in ids]
    assertions.equal(len(set(union)), len(union),
                     f"{what}: distinct ids over all ranks (no row read twice)", setting)
    stray = sorted(set(union) - set(range(rows)))
    assertions.equal(stray, [], f"{what}: ids that are not in the dataset", setting)


# ------------------------------------------------------------------------ no fit
@clause("data.dataset")
def check_dataset_basics(impl):
    pytest.importorskip("torch")
    import pandas as pd

    d = impl.data
    setting = f"{impl.name}: {d.__name__} on the driver"
    rows = data_probe.items(10)
    ds = d.from_items(rows)
    assertions.equal(isinstance(ds, d.Dataset), True, "from_items(...) is a Dataset", setting)
    assertions.equal(ds.count(), 10, "from_items(10 rows).count()", setting)
    seen = sorted((dict(r) for r in ds.iter_rows()), key=lambda r: r["id"])
    assertions.equal([{"id": int(r["id"]), "x": float(r["x"])} for r in seen], rows,
                     "from_items(rows).iter_rows() (sorted by id)", setting)
    assertions.equal(sorted(int(r["item"]) for r in d.from_items([3, 1, 2]).iter_rows()),
                     [1, 2, 3], "from_items([3, 1, 2]): rows {'item': value}", setting)
    batches = list(ds.iter_batches(batch_size=4, batch_format="numpy"))
    assertions.equal([sorted(b) for b in batches], [["id", "x"]] * 3,
                     "iter_batches(batch_size=4, batch_format='numpy'): batch keys", setting)
    assertions.equal([len(b["id"]) for b in batches], [4, 4, 2],
                     "iter_batches(batch_size=4) batch sizes over 10 rows", setting)
    frames = list(ds.iter_batches(batch_size=5, batch_format="pandas"))
    assertions.equal([(type(f).__name__, len(f)) for f in frames], [("DataFrame", 5)] * 2,
                     "iter_batches(batch_size=5, batch_format='pandas')", setting)
    tensors = list(ds.iter_torch_batches(batch_size=4))
    assertions.equal(sorted({f"{k}:{v.dtype}:{v.device}" for b in tensors for k, v in b.items()}),
                     ["id:torch.int64:cpu", "x:torch.float64:cpu"],
                     "iter_torch_batches(batch_size=4) on the driver: column:dtype:device",
                     setting)
    materialized = ds.materialize()
    assertions.equal((isinstance(materialized, d.Dataset), materialized.count()), (True, 10),
                     "materialize(): (is a Dataset, count())", setting)
    frame = ds.to_pandas()
    assertions.equal((type(frame).__name__, sorted(frame.columns), sorted(frame["id"].tolist())),
                     ("DataFrame", ["id", "x"], list(range(10))), "to_pandas()", setting)
    r = d.range(7)
    assertions.equal((r.count(), sorted(int(x["id"]) for x in r.iter_rows())),
                     (7, list(range(7))), "range(7): (count(), ids of the column 'id')", setting)
    source = pd.DataFrame({"id": [1, 2, 3], "y": ["a", "b", "c"]})
    back = d.from_pandas(source).to_pandas().sort_values("id")
    assertions.equal((list(back.columns), back["id"].tolist(), back["y"].tolist()),
                     (["id", "y"], [1, 2, 3], ["a", "b", "c"]),
                     "from_pandas(df).to_pandas() (columns, values)", setting)


@clause("data.config")
def check_data_config(impl):
    t = impl.train
    params = inspect.signature(t.DataConfig).parameters
    assertions.equal([(k, p.default) for k, p in params.items()],
                     [("datasets_to_split", "all"), ("execution_options", None),
                      ("enable_shard_locality", True)],
                     "DataConfig parameters and defaults", impl.name)
    for value in ("all", ["train"], []):
        t.DataConfig(datasets_to_split=value)
    for value in ("train", ("train",), None, {"train"}):
        try:
            t.DataConfig(datasets_to_split=value)
        except TypeError as exc:
            assertions.equal(str(exc), TYPE_ERROR.format(type=type(value).__name__, value=value),
                             f"DataConfig(datasets_to_split={value!r}): TypeError message",
                             impl.name)
        else:
            raise AssertionError(f"DataConfig(datasets_to_split={value!r}) returned, expected "
                                 f"TypeError [{impl.name}]")


# ------------------------------------------------------------------------ main fit
@clause("data.shard-split")
def check_split_shards(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    shards = _by_rank(journal, "shard")
    for rank, e in sorted(shards.items()):
        assertions.equal(e["is_iterator"], True,
                         f"rank {rank}: get_dataset_shard('train') is a DataIterator "
                         f"(got {e['type']})", setting)
    passes = _by_rank(journal, "train_passes")
    _equal_split({r: e["passes"]["iter_rows"]["ids"] for r, e in passes.items()},
                 MAIN["train"], MAIN["workers"], "'train' shards, first pass (iter_rows)",
                 setting)
    first = passes[0]["passes"]["iter_rows"]
    assertions.equal(first["keys"], ["id", "x"], "keys of a row of the shard", setting)


@clause("data.shard-unsplit")
def check_unsplit_dataset(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    valid = _by_rank(journal, "valid")
    assertions.equal(sorted(valid), list(range(MAIN["workers"])), "ranks that read 'valid'",
                     setting)
    full = list(range(VALID_FIRST, VALID_FIRST + MAIN["valid"]))
    for rank, e in sorted(valid.items()):
        assertions.equal(e["is_iterator"], True,
                         f"rank {rank}: get_dataset_shard('valid') is a DataIterator "
                         f"(got {e['type']})", setting)
        assertions.equal(sorted(e["ids"]), full,
                         f"rank {rank}: ids of 'valid' (not in datasets_to_split: all rows)",
                         setting)


@clause("data.shard-unknown")
def check_unknown_dataset_name(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    for rank, e in sorted(_by_rank(journal, "valid").items()):
        assertions.equal(e["unknown"], ["KeyError", KEY_ERROR.format(name=data_probe.UNKNOWN)],
                         f"rank {rank}: get_dataset_shard({data_probe.UNKNOWN!r}) raised",
                         setting)
        assertions.equal(e["no_name"], ["KeyError", KEY_ERROR.format(name=None)],
                         f"rank {rank}: get_dataset_shard() (no name) raised", setting)


@clause("data.shard-barrier")
def check_shard_barrier(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    shards = _by_rank(journal, "shard")
    calls = _by_rank(journal, "shard_call")
    assertions.equal(calls[0]["waited"], True,
                     "rank 0 saw every other rank enter get_dataset_shard first (probe setup)",
                     setting)
    zero = shards[0]["called"]
    for rank in range(1, MAIN["workers"]):
        e = shards[rank]
        lead = zero - e["called"]
        if e["returned"] < zero:
            raise AssertionError(
                f"rank {rank}: get_dataset_shard('train') returned {zero - e['returned']:.3f}s "
                f"before rank 0 called it (rank {rank} called {lead:.3f}s before rank 0), "
                f"expected it to wait for rank 0 [{setting}]")


@clause("data.shard-barrier")
def check_rank0_never_waits_for_the_others(impl):
    d = impl.data
    outcome, journal = _fit(impl, "order", impl.DataParallelTrainer, 2,
                            lambda j: {"train": d.from_items(data_probe.items(ORDER_ROWS))})
    setting = (f"{impl.name}: DataParallelTrainer(num_workers=2), datasets {{'train': "
               f"from_items({ORDER_ROWS} rows)}}; rank 0 calls get_dataset_shard('train') and "
               "then report(); rank 1 calls report() and then get_dataset_shard('train')")
    assertions.succeeded(outcome, setting)
    rows = _by_rank(journal, "order_rows")
    ids = sorted(i for rank in (0, 1) for i in rows[rank]["ids"])
    assertions.equal(ids, list(range(ORDER_ROWS)),
                     "the ids ranks 0 and 1 read, together (each row once)", setting)


@clause("data.shard-cached")
def check_shard_is_cached(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    for rank, e in sorted(_by_rank(journal, "train_passes").items()):
        assertions.equal(e["same_object"], True,
                         f"rank {rank}: a second get_dataset_shard('train') is the first "
                         "call's object", setting)


@clause("data.epochs")
def check_each_pass_is_an_epoch(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    passes = _by_rank(journal, "train_passes")
    each = MAIN["train"] // MAIN["workers"]
    sizes = [data_probe.BATCH] * (each // data_probe.BATCH) + (
        [each % data_probe.BATCH] if each % data_probe.BATCH else [])
    for name in data_probe.EPOCHS:
        _equal_split({r: e["passes"][name]["ids"] for r, e in passes.items()}, MAIN["train"],
                     MAIN["workers"], f"'train' shards, pass {name}", setting)
        if "sizes" in passes[0]["passes"][name]:
            for rank, e in sorted(passes.items()):
                assertions.equal(e["passes"][name]["sizes"], sizes,
                                 f"rank {rank}: batch sizes of {name}(batch_size="
                                 f"{data_probe.BATCH}) over {each} rows", setting)
    for rank, e in sorted(passes.items()):
        assertions.equal(e["passes"]["materialize"]["columns"], ["id", "x"],
                         f"rank {rank}: columns of materialize().to_pandas()", setting)


@clause("data.torch-batches")
def check_torch_batches(impl):
    outcome, journal, setting = _main_run(impl)
    assertions.succeeded(outcome, setting)
    for rank, e in sorted(_by_rank(journal, "train_passes").items()):
        seen = e["passes"]["iter_torch_batches"]
        assertions.equal(seen["batch_types"], ["dict"],
                         f"rank {rank}: types of the batches of iter_torch_batches", setting)
        assertions.equal(seen["columns"], ["id:Tensor:torch.int32:cpu",
                                           "x:Tensor:torch.float64:cpu"],
                         f"rank {rank}: column:type:dtype:device of iter_torch_batches("
                         "dtypes={'id': torch.int32, 'x': torch.float64}) on a CPU worker",
                         setting)
    for rank, e in sorted(_by_rank(journal, "valid").items()):
        assertions.equal(e["torch_columns"], ["id:torch.float32", "x:torch.float32"],
                         f"rank {rank}: column:dtype of iter_torch_batches(dtypes=torch.float32)",
                         setting)
        assertions.equal(e["torch_sizes"], [4, 2],
                         f"rank {rank}: batch sizes of iter_torch_batches(batch_size=4) over "
                         f"{MAIN['valid']} rows", setting)
        assertions.equal(e["collate_and_dtypes"], ["ValueError", COLLATE_ERROR],
                         f"rank {rank}: iter_torch_batches(collate_fn=..., dtypes=...) raised",
                         setting)


# ------------------------------------------------------------------------ restart
@clause("data.restart", "data.shard-split")
def check_shards_after_restart(impl):
    outcome, journal, setting = _restart_run(impl)
    assertions.succeeded(outcome, setting)
    world = RESTART["workers"]
    attempts = sorted({e["attempt"] for e in journal.events("data_start")})
    assertions.equal(attempts, [0, 1], "attempts that started", setting)
    for attempt in attempts:
        rows = _by_rank(journal, "restart_rows", attempt)
        _equal_split({r: e["train"] for r, e in rows.items()}, RESTART["train"], world,
                     f"attempt {attempt}: 'train' shards (a callable's dataset)", setting)
        _equal_split({r: e["eval"] for r, e in rows.items()}, RESTART["eval"], world,
                     f"attempt {attempt}: 'eval' shards (range; split by the default "
                     "DataConfig)", setting)
    resolved = journal.events("resolved")
    assertions.equal(len(resolved), len(attempts),
                     "calls of the 'train' callable (one per worker-group start)", setting)
    starts = journal.events("data_start")
    raised = journal.events("raise")
    for attempt, call in zip(attempts, resolved, strict=True):
        first = min(e["t"] for e in starts if e["attempt"] == attempt)
        after = raised[0]["t"] if attempt == 1 and raised else float("-inf")
        if not after < call["t"] < first:
            raise AssertionError(
                f"call {attempt} of the 'train' callable was not made between the end of "
                f"attempt {attempt - 1} and the start of attempt {attempt}'s training "
                f"functions (call at t={call['t']:.3f}, previous attempt raised at "
                f"t={after:.3f}, first start at t={first:.3f}) [{setting}]")


# ------------------------------------------------------------------------ local mode
