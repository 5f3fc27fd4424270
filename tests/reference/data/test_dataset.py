"""reference.data in one process: creating, transforming lazily, consuming, splitting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference.data as rd
from reference.data.dataset import MaterializedDataset


def ids(ds) -> list[int]:
    return [r["id"] for r in ds.iter_rows()]


# ------------------------------------------------------------------------------ creating
def test_range_rows_and_blocks():
    ds = rd.range(10, override_num_blocks=3)
    assert ds.num_blocks() == 3
    assert ids(ds) == list(range(10))
    assert ds.count() == 10
    assert ds.columns() == ["id"]
    assert ds.schema().types == [pa.int64()]


def test_from_items_dicts_and_values():
    assert rd.from_items([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]).take_all() == [
        {"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert rd.from_items([3, 4]).take_all() == [{"item": 3}, {"item": 4}]


def test_from_pandas_arrow_numpy():
    df = pd.DataFrame({"x": [1.0, 2.0], "y": [3, 4]})
    pd.testing.assert_frame_equal(rd.from_pandas(df).to_pandas(), df)
    assert rd.from_pandas([df, df]).count() == 4
    assert rd.from_arrow(pa.table({"z": [1, 2, 3]})).take(2) == [{"z": 1}, {"z": 2}]
    images = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    batch = rd.from_numpy(images).take_batch(3)
    np.testing.assert_array_equal(batch["data"], images)


@pytest.mark.parametrize("call, message", [
    (lambda: rd.range(-1), "range(n=-1)"),
    (lambda: rd.range(3, override_num_blocks=0), "override_num_blocks=0"),
    (lambda: rd.from_items({"a": 1}), "expected a list"),
    (lambda: rd.from_pandas([1]), "expected a pandas.DataFrame"),
    (lambda: rd.from_numpy([1, 2]), "expected a numpy.ndarray"),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        call()


# ------------------------------------------------------------------------------ transforming
def test_transforms_are_lazy_and_leave_the_input_alone():
    calls = []

    def spy(batch):
        calls.append(len(batch["id"]))
        return batch

    ds = rd.range(8)
    mapped = ds.map_batches(spy, batch_size=3)
    assert calls == []  # nothing ran
    assert ids(mapped) == list(range(8))
    assert sum(calls) == 8
    assert ids(ds) == list(range(8))


def test_map_batches_formats_and_batch_size():
    seen = []

    def double(batch):
        seen.append(type(batch).__name__)
        if isinstance(batch, pd.DataFrame):
            return batch.assign(id=batch["id"] * 2)
        if isinstance(batch, pa.Table):
            return pa.table({"id": pa.compute.multiply(batch["id"], 2)})
        return {"id": batch["id"] * 2}

    for fmt, kind in [("numpy", "dict"), ("pandas", "DataFrame"), ("pyarrow", "Table")]:
        seen.clear()
        out = rd.range(10, override_num_blocks=1).map_batches(double, batch_format=fmt,
                                                              batch_size=4)
        assert ids(out) == [2 * i for i in range(10)]
        assert seen == [kind] * 3  # 4 + 4 + 2 rows


def test_map_batches_callable_class_built_once_with_constructor_args():
    class AddOffset:
        built = 0

        def __init__(self, offset):
            AddOffset.built += 1
            self.offset = offset

        def __call__(self, batch, scale):
            return {"id": batch["id"] * scale + self.offset}

    ds = rd.range(6, override_num_blocks=3).map_batches(
        AddOffset, fn_constructor_args=(100,), fn_kwargs={"scale": 10}, concurrency=1)
    assert ids(ds) == [100 + 10 * i for i in range(6)]
    assert ids(ds) == [100 + 10 * i for i in range(6)]
    assert AddOffset.built == 1


def test_map_batches_may_change_the_row_count():
    ds = rd.range(5).map_batches(lambda b: {"id": np.repeat(b["id"], 2)})
    assert ds.count() == 10


def test_map_filter_flat_map_columns():
    ds = rd.range(6).map(lambda r: {"id": r["id"], "sq": r["id"] ** 2, "s": str(r["id"])})
    assert ds.filter(lambda r: r["id"] % 2).select_columns(["sq"]).take_all() == [
        {"sq": 1}, {"sq": 9}, {"sq": 25}]
    assert ds.drop_columns(["s", "sq"]).columns() == ["id"]
    assert ds.rename_columns({"sq": "square"}).columns() == ["id", "square", "s"]
    assert rd.range(2).flat_map(lambda r: [r, r]).count() == 4
    added = rd.range(3).add_column("twice", lambda df: df["id"] * 2)
    assert added.take_all() == [{"id": i, "twice": 2 * i} for i in range(3)]


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="no column 'nope'"):
        rd.range(3).select_columns(["nope"]).take_all()


def test_user_function_returning_nothing_is_an_error():
    with pytest.raises(TypeError, match="returned None"):
        rd.range(3).map_batches(lambda b: None).take_all()


def test_random_shuffle_is_a_permutation_and_seeded():
    ds = rd.range(50, override_num_blocks=4)
    a, b = ids(ds.random_shuffle(seed=7)), ids(ds.random_shuffle(seed=7))
    assert a == b and sorted(a) == list(range(50)) and a != list(range(50))
    unseeded = ds.random_shuffle()
    assert ids(unseeded) != ids(unseeded)  # a fresh order at each execution (p ~ 1/50!)


def test_repartition_keeps_rows_in_order():
    ds = rd.range(10, override_num_blocks=2).repartition(5)
    assert ds.num_blocks() == 5 and ids(ds) == list(range(10))
    assert rd.range(10).repartition(target_num_rows_per_block=3).num_blocks() == 4


def test_limit_union_and_limit_after_filter_stops_early():
    read = []

    def spy(row):
        read.append(row["id"])
        return True

    assert ids(rd.range(10).limit(3).union(rd.range(2))) == [0, 1, 2, 0, 1]
    assert ids(rd.range(100, override_num_blocks=10).filter(spy).limit(3)) == [0, 1, 2]
    assert len(read) == 10  # only the first block was read


# ------------------------------------------------------------------------------ consuming
def test_take_batch_formats_and_to_pandas_limit():
    ds = rd.range(5)
    assert ds.take_batch(2, batch_format="pandas")["id"].tolist() == [0, 1]
    assert ds.take_batch(2, batch_format="pyarrow").num_rows == 2
    with pytest.raises(ValueError, match="more than 3 rows"):
        ds.to_pandas(limit=3)
    assert len(ds.to_pandas(limit=5)) == 5


def test_materialize_executes_once():
    calls = []
    ds = rd.range(4).map(lambda r: calls.append(1) or r).materialize()
    assert isinstance(ds, MaterializedDataset)
    assert ids(ds) == ids(ds) == [0, 1, 2, 3]
    assert len(calls) == 4


def test_iterables_are_fresh_epochs():
    it = rd.range(5).iter_batches(batch_size=2)
    assert [b["id"].tolist() for b in it] == [[0, 1], [2, 3], [4]]
    assert [b["id"].tolist() for b in it] == [[0, 1], [2, 3], [4]]


# ------------------------------------------------------------------------------ splitting
@st.composite
def datasets(draw):
    n = draw(st.integers(0, 60))
    blocks = draw(st.integers(1, 8))
    ds = rd.range(n, override_num_blocks=blocks)
    kept = set(range(n))
    if draw(st.booleans()):
        modulo = draw(st.integers(2, 4))
        ds = ds.filter(lambda r, m=modulo: r["id"] % m)
        kept = {i for i in kept if i % modulo}
    if draw(st.booleans()):
        ds = ds.random_shuffle(seed=draw(st.integers(0, 3)))
    return ds, kept


@settings(max_examples=150, deadline=None)
@given(datasets(), st.integers(1, 5), st.booleans())
def test_streaming_split_is_disjoint_and_equal(data, n, equal):
    ds, kept = data
    shards = [[r["id"] for r in it.iter_rows()] for it in ds.streaming_split(n, equal=equal)]
    flat = [i for s in shards for i in s]
    assert len(flat) == len(set(flat)), f"rows in two shards: {shards}"
    assert set(flat) <= kept
    if equal:
        assert [len(s) for s in shards] == [len(kept) // n] * n
    else:
        assert set(flat) == kept
        assert max(map(len, shards)) - min(map(len, shards)) <= 1


def test_streaming_split_iterates_each_shard_again_with_the_same_rows():
    first, second = rd.range(9).streaming_split(2, equal=True)
    assert ids(first) == ids(first) == [0, 1, 2, 3]
    assert ids(second) == [4, 5, 6, 7]


def test_shards_of_an_unseeded_shuffle_agree_in_each_epoch_and_change_between_epochs():
    shards = rd.range(40, override_num_blocks=4).random_shuffle().streaming_split(2)
    epoch0 = [ids(s) for s in shards]
    epoch1 = [ids(s) for s in shards]
    for epoch in (epoch0, epoch1):
        assert sorted(epoch[0] + epoch[1]) == list(range(40))
    assert epoch0 != epoch1


def test_a_function_that_changes_its_rows_between_executions_fails_clearly():
    flips = iter([True] * 6 + [False] * 6)  # 6 rows when counted, 4 when read
    ds = rd.range(6, override_num_blocks=1).filter(lambda r: next(flips) or r["id"] < 4)
    shard, = ds.streaming_split(1, equal=True)
    with pytest.raises(RuntimeError, match="same rows on every execution"):
        ids(shard)


def test_split_and_train_test_split():
    parts = rd.range(10).split(3)
    assert [ids(p) for p in parts] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert [p.count() for p in rd.range(10).split(3, equal=True)] == [3, 3, 3]
    train, test = rd.range(8).train_test_split(test_size=0.25)
    assert (ids(train), ids(test)) == ([0, 1, 2, 3, 4, 5], [6, 7])
    train, test = rd.range(8).train_test_split(test_size=3, shuffle=True, seed=1)
    assert sorted(ids(train) + ids(test)) == list(range(8)) and test.count() == 3
    with pytest.raises(ValueError, match="test_size=1.5"):
        rd.range(8).train_test_split(test_size=1.5)
