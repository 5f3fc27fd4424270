"""DataIterator's batches as a training function reads them (clauses `data.batches`,
`data.torch-batches`): iter_batches / iter_torch_batches over blocks, prefetching, drop_last
and a local shuffle buffer, their defaults, and a consumer slower than the reading."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conformance import assertions, data_probe
from conformance.catalogue import clause


@clause("data.batches")
@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 40), blocks=st.integers(1, 5), batch=st.integers(1, 12),
       drop_last=st.booleans(), shuffle=st.one_of(st.none(), st.integers(1, 16)),
       prefetch=st.integers(0, 3), torch=st.booleans(),
       device=st.sampled_from(["auto", "cpu"]))
# where Ray 2.60 cut a short batch in the middle with drop_last (local shuffle buffer of 1)
@example(rows=26, blocks=2, batch=5, drop_last=True, shuffle=1, prefetch=0, torch=False,
         device="cpu")
def check_batches_cover_every_row(impl, rows, blocks, batch, drop_last, shuffle, prefetch,
                                  torch, device):
    """Every epoch of iter_batches / iter_torch_batches cuts the rows into batches of
    exactly batch_size (one shorter, or none with drop_last), each row once, whatever the
    blocks and the prefetching; with a local shuffle buffer, batches of at most batch_size
    holding every row once (with drop_last: all but fewer than batch_size rows)."""
    if torch:
        pytest.importorskip("torch")
    ds = impl.data.from_items(data_probe.items(rows)).repartition(blocks)
    options = dict(batch_size=batch, drop_last=drop_last, prefetch_batches=prefetch,
                   local_shuffle_buffer_size=shuffle, local_shuffle_seed=7)
    if torch:
        epoch = ds.iter_torch_batches(device=device, **options)
        ids = [[int(i) for i in b["id"].tolist()] for b in epoch]
    else:
        epoch = ds.iter_batches(batch_format="numpy", **options)
        ids = [[int(i) for i in b["id"]] for b in epoch]
    setting = (f"{impl.name}: from_items({rows} rows).repartition({blocks})."
               f"{f'iter_torch_batches(device={device!r}, ' if torch else 'iter_batches('}"
               f"{options})")
    full, rest = divmod(rows, batch)
    sizes = [batch] * full + ([rest] if rest and not drop_last else [])
    # Ray formats batches on several threads when it prefetches: they may come out of order
    if shuffle:
        # with a local shuffle buffer Ray 2.60 may cut a short batch wherever its buffer runs
        # low, not only at the end (seen: 29 rows by 4 with a buffer of 1 -> [2, 3, 4 x 6];
        # with drop_last, 26 rows by 5 -> [3, 5 x 4]): none is longer, and drop_last drops
        # the rows left at the end, fewer than batch_size
        got = sum(map(len, ids))
        assertions.equal((max(map(len, ids), default=0) <= batch,
                          rows - batch < got <= rows if drop_last else got == rows),
                         (True, True), f"(every batch at most batch_size, {got} rows in all "
                         f"batches {'within batch_size of' if drop_last else 'equal to'} "
                         f"{rows})", setting)
    else:
        assertions.equal(sorted(len(b) for b in ids), sorted(sizes), "batch sizes (sorted)",
                         setting)
    seen = [i for b in ids for i in b]
    assertions.equal(len(set(seen)), len(seen), "rows seen more than once", setting)
    assertions.equal(set(seen) <= set(range(rows)), True, f"ids {sorted(seen)} are the "
                     "dataset's", setting)
    if shuffle is None and not drop_last:
        assertions.equal(sorted(seen), list(range(rows)), "ids of one epoch", setting)


@clause("data.torch-batches")
def check_list_columns_become_tensors(impl):
    pytest.importorskip("torch")
    d = impl.data
    even = d.from_items([{"v": [i, i + 1, i + 2]} for i in range(4)])
    (batch,) = list(even.iter_torch_batches(batch_size=4))
    assertions.equal((list(batch["v"].shape), batch["v"].tolist()),
                     ([4, 3], [[i, i + 1, i + 2] for i in range(4)]),
                     "iter_torch_batches() of a column of equal-length lists (shape, values)",
                     impl.name)
    ragged = d.from_items([{"v": [1, 2]}, {"v": [1, 2, 3]}])
    with pytest.raises(Exception):  # Ray: RuntimeError; the reference: TypeError
        list(ragged.iter_torch_batches(batch_size=2))


@clause("data.batches")
def check_batch_option_defaults(impl):
    defaults = {"prefetch_batches": 1, "batch_size": 256, "drop_last": False,
                "local_shuffle_buffer_size": None, "local_shuffle_seed": None}
    torch_only = {"dtypes": None, "device": "auto", "collate_fn": None}
    for method, want in (("iter_batches", dict(defaults, batch_format="default")),
                         ("iter_torch_batches", dict(defaults, **torch_only))):
        params = inspect.signature(getattr(impl.data.DataIterator, method)).parameters
        assertions.equal({k: params[k].default if k in params else "<missing>" for k in want},
                         want, f"DataIterator.{method}'s defaults", impl.name)
        assertions.equal({p.kind.name for k, p in params.items() if k != "self"},
                         {"KEYWORD_ONLY"}, f"kinds of DataIterator.{method}'s parameters",
                         impl.name)


@clause("data.batches")
def check_a_slow_consumer_gets_every_row(impl):
    """A training step slower than reading: the prefetching must wait, not give up."""
    import time

    ds = impl.data.from_items(data_probe.items(12)).repartition(6)
    seen = []
    for batch in ds.iter_batches(batch_size=2, batch_format="numpy", prefetch_batches=1):
        seen += [int(i) for i in batch["id"]]
        time.sleep(0.25)
    assertions.equal(sorted(seen), list(range(12)), "ids read by a consumer sleeping 0.25 s "
                     "a batch (6 blocks, prefetch_batches=1)", impl.name)
