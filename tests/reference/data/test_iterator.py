"""DataIterator: batch cutting, local shuffling, prefetching, torch tensors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference.data as rd
from reference.data.collate_fn import ArrowBatchCollateFn, PandasBatchCollateFn

torch = pytest.importorskip("torch")


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 80), st.integers(1, 9), st.integers(1, 20), st.booleans(),
       st.integers(0, 2))
def test_batches_are_exactly_batch_size_across_blocks(n, blocks, size, drop_last, prefetch):
    ds = rd.range(n, override_num_blocks=blocks)
    batches = [b["id"].tolist() for b in ds.iter_batches(batch_size=size, drop_last=drop_last,
                                                         prefetch_batches=prefetch)]
    expected = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
    if drop_last and expected and len(expected[-1]) < size:
        expected.pop()
    assert batches == expected


def test_whole_blocks_with_batch_size_none():
    sizes = [len(b["id"]) for b in rd.range(10, override_num_blocks=3).iter_batches(
        batch_size=None)]
    assert sizes == [3, 3, 4]


def test_local_shuffle_mixes_rows_and_keeps_each_once():
    ds = rd.range(200, override_num_blocks=4)
    rows = [i for b in ds.iter_batches(batch_size=16, local_shuffle_buffer_size=50,
                                       local_shuffle_seed=3) for i in b["id"].tolist()]
    assert sorted(rows) == list(range(200)) and rows != list(range(200))
    again = [i for b in ds.iter_batches(batch_size=16, local_shuffle_buffer_size=50,
                                        local_shuffle_seed=3) for i in b["id"].tolist()]
    assert rows == again


def test_stopping_early_leaves_no_prefetch_thread():
    before = set(threading.enumerate())
    for _batch in rd.range(10_000, override_num_blocks=20).iter_batches(batch_size=10,
                                                                      prefetch_batches=4):
        producers = [t for t in set(threading.enumerate()) - before
                     if t.name == "reference-data-prefetch"]
        break
    assert len(producers) == 1  # blocked on its full queue when the loop stopped
    producers[0].join(timeout=5)
    assert not producers[0].is_alive(), "the prefetch thread outlived its iteration"


def test_an_error_while_producing_reaches_the_consumer():
    def boom(batch):
        raise KeyError("broken row")

    with pytest.raises(KeyError, match="broken row"):
        list(rd.range(5).map_batches(boom).iter_batches(prefetch_batches=2))


def test_torch_batches_dtypes_and_device():
    ds = rd.range(6).map(lambda r: {"x": float(r["id"]), "y": r["id"] % 2})
    batch = next(iter(ds.iter_torch_batches(batch_size=4, dtypes=torch.float16)))
    assert batch["x"].dtype == batch["y"].dtype == torch.float16
    per_column = next(iter(ds.iter_torch_batches(
        batch_size=4, dtypes={"x": torch.float64, "y": torch.int32}, device="cpu")))
    assert (per_column["x"].dtype, per_column["y"].dtype) == (torch.float64, torch.int32)
    assert per_column["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert batch["x"].device.type == "cpu"  # device="auto" outside a training function


def test_torch_batches_of_tensor_columns_keep_their_shape():
    images = np.arange(5 * 3 * 2, dtype=np.float32).reshape(5, 3, 2)
    batch = next(iter(rd.from_numpy(images).iter_torch_batches(batch_size=5)))
    assert batch["data"].shape == (5, 3, 2)
    torch.testing.assert_close(batch["data"], torch.from_numpy(images))


def test_collate_fn_gets_the_format_its_class_asks_for():
    ds = rd.range(4)
    assert next(iter(ds.iter_torch_batches(batch_size=4, collate_fn=lambda b: sorted(b))))[0] \
        == "id"

    class Arrow(ArrowBatchCollateFn):
        def __call__(self, batch):
            return torch.tensor(batch["id"].to_pylist())

    class Pandas(PandasBatchCollateFn):
        def __call__(self, batch):
            return torch.tensor(batch["id"].to_numpy()) * 2

    assert next(iter(ds.iter_torch_batches(batch_size=4, collate_fn=Arrow()))).tolist() == [
        0, 1, 2, 3]
    assert next(iter(ds.iter_torch_batches(batch_size=4, collate_fn=Pandas()))).tolist() == [
        0, 2, 4, 6]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"collate_fn": lambda b: b, "dtypes": torch.float32}, ValueError,
     "collate_fn cannot be used with dtypes"),
    ({"batch_size": 0}, ValueError, "batch_size=0"),
    ({"prefetch_batches": -1}, ValueError, "prefetch_batches=-1"),
    ({"local_shuffle_buffer_size": 0}, ValueError, "local_shuffle_buffer_size=0"),
])
def test_bad_iteration_arguments_fail_at_the_call(kwargs, error, message):
    with pytest.raises(error, match=message):
        rd.range(3).iter_torch_batches(**kwargs)


def test_string_columns_cannot_become_tensors():
    with pytest.raises(TypeError, match="column 's' holds str"):
        next(iter(rd.from_items([{"s": "a"}]).iter_torch_batches()))
