"""What a report costs as the run grows: each entry is encoded and scored once, the written
snapshot is still exactly the JSON of the whole document, and a registration is all or
nothing. `ci/bench/snapshot_cost.py` has the figures, beside Ray's."""

import json
import logging
import os
import statistics
import time
from dataclasses import dataclass
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.train._internal.storage import (
    CheckpointManager,
    StorageContext,
    checkpoint_manager,
    snapshot,
)


@dataclass
class Config:
    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"


def fill(manager, storage, count, metrics=lambda i: {"i": i}, start=0):
    for i in range(start, start + count):
        path = storage.build_checkpoint_path_from_name(f"c{i:05d}")
        os.makedirs(path)
        manager.register_checkpoint(path, metrics(i))


def test_a_report_encodes_only_its_own_entry(tmp_path, monkeypatch):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config(num_to_keep=1000))
    fill(manager, storage, 1000, lambda i: {"i": i, "loss": 0.5})
    encoded = []
    real = snapshot.encode_entry
    monkeypatch.setattr(snapshot, "encode_entry",
                        lambda name, *a, **k: encoded.append(name) or real(name, *a, **k))
    fill(manager, storage, 1, lambda i: {"i": i, "loss": 0.25}, start=1000)
    assert encoded == ["c01000"], f"{len(encoded)} entries were encoded for one report"
    with open(storage.checkpoint_manager_snapshot_path) as f:
        doc = json.load(f)
    assert len(doc["checkpoint_results"]) == 1000
    assert doc["checkpoint_results"][-1]["metrics"] == {"i": 1000, "loss": 0.25}
    assert doc["checkpoint_results"][0]["metrics"] == {"i": 1, "loss": 0.5}


def test_a_scored_report_flattens_only_its_own_metrics(tmp_path, monkeypatch):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config(num_to_keep=500,
                                                checkpoint_score_attribute="m/loss"))
    fill(manager, storage, 500, lambda i: {"m": {"loss": (i * 7919) % 500}})
    calls = []
    real = checkpoint_manager.flatten_metrics
    monkeypatch.setattr(checkpoint_manager, "flatten_metrics",
                        lambda m, *a: calls.append(1) or real(m, *a))
    fill(manager, storage, 1, lambda i: {"m": {"loss": 250.5}}, start=500)
    assert len(calls) <= 2, f"flatten_metrics ran {len(calls)} times for one report"
    losses = [r.metrics["m"]["loss"] for r in manager.checkpoint_results]
    assert losses == sorted(losses) and 250.5 in losses


def independent_json(manager) -> str:
    """The snapshot as `json.dumps` of the whole document (how it was written before)."""
    snap = manager.to_snapshot()

    def entry(e):
        if e is None:
            return None
        return {"version": e.version, "checkpoint_dir_name": e.checkpoint_dir_name,
                "metrics": snapshot.to_jsonable(e.metrics, "metrics")}

    doc = {
        "ray_version": snap.ray_version,
        "checkpoint_results": [entry(e) for e in snap.checkpoint_results],
        "checkpoint_report_indices": list(snap.checkpoint_report_indices),
        "latest_checkpoint_result": entry(snap.latest_checkpoint_result),
        "pending_training_results": [entry(e) for e in snap.pending_training_results],
        "pending_validation_specs": snapshot.to_jsonable(snap.pending_validation_specs, "s"),
        "current_report_index": snap.current_report_index,
        "validated_checkpoint_dir_names": snap.validated_checkpoint_dir_names,
        "timed_out_validation_checkpoint_dir_names":
            snap.timed_out_validation_checkpoint_dir_names,
        "failed_validation_checkpoint_dir_names": snap.failed_validation_checkpoint_dir_names,
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


VALUES = st.one_of(
    st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
    st.none(), st.booleans(), st.lists(st.floats(width=32), max_size=3).map(tuple),
)
METRICS = st.dictionaries(st.sampled_from(["loss", "a", "é"]), VALUES, max_size=3).map(
    lambda d: d | {"nested": {"loss": d.get("loss", 0)}})
CONFIGS = st.builds(
    Config, num_to_keep=st.one_of(st.none(), st.integers(1, 3)),
    checkpoint_score_attribute=st.sampled_from([None, "nested/loss"]),
    checkpoint_score_order=st.sampled_from(["max", "min"]),
)


def scorable(metrics, config):
    value = metrics["nested"]["loss"]
    return config.checkpoint_score_attribute is None or (
        isinstance(value, (int, float)) and not isinstance(value, bool))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.filter_too_much])
@given(config=CONFIGS, sequence=st.lists(METRICS, min_size=1, max_size=6),
       names=st.lists(st.sampled_from(["a", "b", "c", "d/e"]), min_size=6, max_size=6),
       resume_at=st.integers(0, 6))
def test_the_written_snapshot_is_the_json_of_the_whole_document(config, sequence, names,
                                                                   resume_at, tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    storage = StorageContext(str(root), "run")
    manager = CheckpointManager(storage, config)
    for i, metrics in enumerate(sequence):
        if not scorable(metrics, config):
            continue
        if i == resume_at:
            manager = CheckpointManager(StorageContext(str(root), "run"), config)
        path = storage.build_checkpoint_path_from_name(names[i])
        os.makedirs(path, exist_ok=True)
        manager.register_checkpoint(path, metrics)
        with open(storage.checkpoint_manager_snapshot_path, encoding="utf-8") as f:
            assert f.read() == independent_json(manager)


def test_a_failed_snapshot_write_changes_nothing(tmp_path, monkeypatch):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config(num_to_keep=2))
    fill(manager, storage, 2)
    before = open(storage.checkpoint_manager_snapshot_path).read()
    real = snapshot.write_snapshot

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot, "write_snapshot", full)
    path = storage.build_checkpoint_path_from_name("c00002")
    os.makedirs(path)
    with pytest.raises(OSError):
        manager.register_checkpoint(path, {"i": 2})
    assert [r.dir_name for r in manager.checkpoint_results] == ["c00000", "c00001"]
    assert manager.latest_checkpoint_result.dir_name == "c00001"
    assert manager.current_report_index == 2
    assert os.path.isdir(storage.build_checkpoint_path_from_name("c00000"))  # not evicted
    assert open(storage.checkpoint_manager_snapshot_path).read() == before

    monkeypatch.setattr(snapshot, "write_snapshot", real)
    manager.register_checkpoint(path, {"i": 2})  # the retry
    assert [r.dir_name for r in manager.checkpoint_results] == ["c00001", "c00002"]
    assert not os.path.exists(storage.build_checkpoint_path_from_name("c00000"))
    with open(storage.checkpoint_manager_snapshot_path) as f:
        assert f.read() == independent_json(manager)


def test_large_metrics_are_warned_about_once(tmp_path, caplog):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage)
    with caplog.at_level(logging.WARNING):
        fill(manager, storage, 3, lambda i: {"values": [0.5] * 300_000})
    warnings = [r for r in caplog.records if "take 1.2 MB" in r.getMessage()]
    assert len(warnings) == 1
    assert "files in the checkpoint folder" in warnings[0].getMessage()


@pytest.mark.slow
def test_a_report_with_1000_kept_costs_at_most_thrice_one_with_1_kept(tmp_path):
    """Reports into two runs, interleaved so that machine load hits both alike; the fastest
    tenth of each (the cost of the work itself: a loaded machine's stalls land on either),
    within 3x (re-encoding every kept entry per report made it 8x)."""
    runs = {}
    for kept in (1, 1000):
        storage = StorageContext(str(tmp_path), f"kept{kept}")
        manager = CheckpointManager(storage, Config(num_to_keep=kept))
        fill(manager, storage, kept, lambda i: {"loss": 1 / (i + 1), "step": i})
        runs[kept] = (storage, manager, [])
    for i in range(1000, 1200):
        for storage, manager, times in runs.values():
            path = storage.build_checkpoint_path_from_name(f"c{i:05d}")
            os.makedirs(path)
            start = time.perf_counter()
            manager.register_checkpoint(path, {"loss": 1 / (i + 1), "step": i})
            times.append(time.perf_counter() - start)
    one, many = (statistics.quantiles(runs[k][2], n=10)[0] for k in (1, 1000))
    assert many <= 3 * one, (
        f"fastest tenth of the reports: {many * 1e6:.0f} us with 1000 kept, "
        f"{one * 1e6:.0f} us with 1 kept")


def naive_jsonable(value):
    """to_jsonable's rules, element by element (its flat-list shortcut must agree)."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, (list, tuple, set, frozenset)):
        return [naive_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): naive_jsonable(v) for k, v in value.items()}
    return value


@given(st.lists(st.one_of(st.floats(), st.integers(), st.booleans(), st.none(),
                          st.text(max_size=2), st.lists(st.floats(), max_size=2)), max_size=8)
       .flatmap(lambda xs: st.sampled_from([xs, tuple(xs)])))
def test_to_jsonable_of_flat_lists_matches_the_element_rules(values):
    got = snapshot.to_jsonable(values, "v")
    assert json.dumps(got) == json.dumps(naive_jsonable(values))
    assert type(got) is list
