import json
import os

import pyarrow.fs as pafs
import pytest

from reference.train._internal.storage import (
    CheckpointManager,
    CheckpointManagerInitializationError,
    ManagerSnapshot,
    SnapshotEntry,
    StorageContext,
    read_result_state,
    read_snapshot,
    write_snapshot,
)

# Written by ray 2.60.0 for a run with CheckpointConfig(num_to_keep=2,
# checkpoint_score_attribute="nested/loss", checkpoint_score_order="min") after six reports
# with losses 3.0, 1.0, <missing>, NaN, 5.0, 2.0 (report indices 0..5).
RAY_WRITTEN = (
    '{"ray_version":"2.60.0","checkpoint_results":[{"version":0,"checkpoint_dir_name":'
    '"checkpoint_2026-11-30_01-05-58.568219","metrics":{"i":5,"nested":{"loss":2.0}}},'
    '{"version":0,"checkpoint_dir_name":"checkpoint_2026-11-30_01-05-58.198779","metrics":'
    '{"i":1,"nested":{"loss":1.0}}},{"version":0,"checkpoint_dir_name":'
    '"checkpoint_2026-11-30_01-05-58.232812","metrics":{"i":2}}],"checkpoint_report_indices":'
    '[5,1,2],"latest_checkpoint_result":{"version":0,"checkpoint_dir_name":'
    '"checkpoint_2026-11-30_01-05-58.568219","metrics":{"i":5,"nested":{"loss":2.0}}},'
    '"pending_training_results":[],"pending_validation_specs":[],"current_report_index":6,'
    '"validated_checkpoint_dir_names":[],"timed_out_validation_checkpoint_dir_names":[],'
    '"failed_validation_checkpoint_dir_names":[]}'
)
RAY_NAMES = [
    "checkpoint_2026-11-30_01-05-58.568219",
    "checkpoint_2026-11-30_01-05-58.198779",
    "checkpoint_2026-11-30_01-05-58.232812",
]


class Config:
    num_to_keep = 2
    checkpoint_score_attribute = "nested/loss"
    checkpoint_score_order = "min"


def ray_run(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    for name in RAY_NAMES:
        os.makedirs(storage.build_checkpoint_path_from_name(name))
    with open(storage.checkpoint_manager_snapshot_path, "w") as f:
        f.write(RAY_WRITTEN)
    return storage


def test_ray_written_snapshot_round_trips_byte_for_byte():
    assert ManagerSnapshot.from_json(RAY_WRITTEN).to_json() == RAY_WRITTEN


def test_the_same_run_on_the_reference_writes_the_same_content(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config())
    losses = [3.0, 1.0, None, float("nan"), 5.0, 2.0]
    order = ["a", "b", "c", "d", "e", "f"]
    for i, (name, loss) in enumerate(zip(order, losses, strict=True)):
        os.makedirs(storage.build_checkpoint_path_from_name(name))
        metrics = {"i": i} if loss is None else {"i": i, "nested": {"loss": loss}}
        manager.register_checkpoint(storage.build_checkpoint_path_from_name(name), metrics)
    ours = open(storage.checkpoint_manager_snapshot_path).read()
    renamed = RAY_WRITTEN
    for ray_name, our_name in zip(RAY_NAMES, ["f", "b", "c"], strict=True):
        renamed = renamed.replace(ray_name, our_name)
    assert ours == renamed


def test_resume_from_a_ray_snapshot(tmp_path):
    storage = ray_run(tmp_path)
    manager = CheckpointManager(storage, Config())
    assert [r.dir_name for r in manager.checkpoint_results] == RAY_NAMES
    assert [r.report_index for r in manager.checkpoint_results] == [5, 1, 2]
    assert manager.latest_checkpoint_result.dir_name == RAY_NAMES[0]
    assert manager.current_report_index == 6
    os.makedirs(storage.build_checkpoint_path_from_name("next"))
    manager.register_checkpoint(storage.build_checkpoint_path_from_name("next"), {"i": 6})
    # missing score -> best under "min", ties by report index: "next" is the new best
    assert [r.dir_name for r in manager.checkpoint_results] == [RAY_NAMES[2], "next"]
    for evicted in RAY_NAMES[:2]:
        assert not os.path.exists(storage.build_checkpoint_path_from_name(evicted))


def test_ray_reads_what_the_reference_writes(tmp_path):
    pytest.importorskip("ray")
    from ray.train.v2._internal.execution.checkpoint.checkpoint_manager import (
        _CheckpointManagerState,
    )

    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config())
    for i, metrics in enumerate([{"nested": {"loss": 1.5}}, {"t": (1, 2), "s": "ü", "n": None}]):
        path = storage.build_checkpoint_path_from_name(f"c{i}")
        os.makedirs(path)
        manager.record_report_without_checkpoint()
        manager.register_checkpoint(path, metrics)
    ours = open(storage.checkpoint_manager_snapshot_path, encoding="utf-8").read()
    assert _CheckpointManagerState.model_validate(json.loads(ours)).model_dump_json() == ours

    from ray.train.v2.api.result import Result as RayResult

    result = RayResult.from_path(storage.experiment_fs_path)
    assert result.checkpoint.path == f"{storage.experiment_fs_path}/c1"
    assert result.metrics == {"t": [1, 2], "s": "ü", "n": None}
    assert [c.path.rsplit("/", 1)[1] for c, _ in result.best_checkpoints] == ["c0", "c1"]


def test_write_read_round_trip_and_atomic_replacement(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    snap = ManagerSnapshot(
        checkpoint_results=[SnapshotEntry("a", {"x": 1}), SnapshotEntry("b/c", {"y": [1, 2]})],
        checkpoint_report_indices=[0, 3],
        current_report_index=4,
        latest_checkpoint_result=SnapshotEntry("b/c", {"y": [1, 2]}),
    )
    write_snapshot(storage, snap)
    write_snapshot(storage, snap)
    back = read_snapshot(storage.storage_filesystem, storage.experiment_fs_path)
    assert back.to_json() == snap.to_json()
    assert sorted(os.listdir(storage.experiment_fs_path)) == [
        ".validate_storage_marker", "checkpoint_manager_snapshot.json",
    ]
    assert read_snapshot(storage.storage_filesystem, str(tmp_path / "nowhere")) is None


CORRUPT = {
    "not json": ("{'single': quotes}", "JSONDecodeError"),
    "empty": ("", "JSONDecodeError"),
    "a list": ("[]", "expected a JSON object"),
    "missing field": ('{"ray_version": "2.60.0"}', "'checkpoint_results' is missing"),
    "bad entry": (
        RAY_WRITTEN.replace('"checkpoint_dir_name":"checkpoint_2026-11-30_01-05-58.198779"',
                            '"checkpoint_dir_name":7'),
        "'checkpoint_dir_name' must be a str",
    ),
    "escaping name": (RAY_WRITTEN.replace(RAY_NAMES[1], "../../etc"), "'../../etc'"),
    "indices": (RAY_WRITTEN.replace("[5,1,2]", "[5,1]"), "checkpoint_report_indices"),
    "latest unknown": (
        RAY_WRITTEN.replace('"latest_checkpoint_result":{"version":0,"checkpoint_dir_name":'
                            '"checkpoint_2026-11-30_01-05-58.568219"',
                            '"latest_checkpoint_result":{"version":0,"checkpoint_dir_name":"zz"'),
        "'zz' is referenced",
    ),
    "bool index": (RAY_WRITTEN.replace('"current_report_index":6', '"current_report_index":true'),
                   "current_report_index"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_snapshot_errors_say_what_and_how_to_fix(tmp_path, case):
    text, detail = CORRUPT[case]
    storage = ray_run(tmp_path)
    with open(storage.checkpoint_manager_snapshot_path, "w") as f:
        f.write(text)
    with pytest.raises(CheckpointManagerInitializationError) as info:
        CheckpointManager(storage, Config())
    message = str(info.value)
    assert detail in message
    assert storage.checkpoint_manager_snapshot_path in message
    assert "delete" in message and "RunConfig(name=...)" in message
    with pytest.raises(RuntimeError, match="is corrupt"):
        read_result_state(storage.storage_filesystem, storage.experiment_fs_path)


def test_other_ray_version_is_named_when_parsing_fails():
    text = '{"ray_version": "2.40.0", "checkpoints": []}'
    with pytest.raises(CheckpointManagerInitializationError, match="written by Ray 2.40.0"):
        ManagerSnapshot.from_json(text)


def test_undecodable_snapshot(tmp_path):
    storage = ray_run(tmp_path)
    with open(storage.checkpoint_manager_snapshot_path, "wb") as f:
        f.write(b"\xff\xfe\x00")
    with pytest.raises(CheckpointManagerInitializationError, match="is corrupt"):
        CheckpointManager(storage)


def test_missing_checkpoint_folder_is_reported_with_the_fix(tmp_path):
    storage = ray_run(tmp_path)
    os.rmdir(storage.build_checkpoint_path_from_name(RAY_NAMES[2]))
    with pytest.raises(CheckpointManagerInitializationError) as info:
        CheckpointManager(storage, Config())
    message = str(info.value)
    assert repr(RAY_NAMES[2]) in message and "does not exist anymore" in message
    assert "RunConfig(name=...)" in message and "deleting" in message
    with pytest.raises(RuntimeError, match="does not exist anymore"):
        read_result_state(storage.storage_filesystem, storage.experiment_fs_path)


def test_read_result_state(tmp_path):
    storage = ray_run(tmp_path)
    fs, run = storage.storage_filesystem, storage.experiment_fs_path
    state = read_result_state(fs, run + "/")
    assert state.experiment_fs_path == run
    assert state.latest == (f"{run}/{RAY_NAMES[0]}", {"i": 5, "nested": {"loss": 2.0}})
    assert [p for p, _ in state.best] == [f"{run}/{n}" for n in RAY_NAMES]


def test_read_result_state_without_a_run_or_snapshot(tmp_path):
    fs = pafs.LocalFileSystem()
    with pytest.raises(RuntimeError, match="doesn't exist"):
        read_result_state(fs, str(tmp_path / "nothing"))
    storage = StorageContext(str(tmp_path), "fresh")
    with pytest.raises(RuntimeError, match="checkpoint_manager_snapshot.json doesn't exist"):
        read_result_state(fs, storage.experiment_fs_path)


def test_manager_construction_removes_crash_leftovers_but_readers_do_not(tmp_path):
    """Result.from_path (read_result_state) leaves them; a run's manager removes them."""
    storage = ray_run(tmp_path)
    run = storage.experiment_fs_path
    os.makedirs(f"{run}/.tmp-c-0123/part")
    open(f"{run}/.tmp-checkpoint_manager_snapshot.json-9", "w").close()
    read_result_state(storage.storage_filesystem, run)
    assert os.path.exists(f"{run}/.tmp-c-0123")
    CheckpointManager(storage)
    assert not [n for n in os.listdir(run) if n.startswith(".tmp-")]
