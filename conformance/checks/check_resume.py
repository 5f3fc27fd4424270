"""Resume by name: a new fit() with the same (storage_path, name) (clause `resume.by-name`)."""

from __future__ import annotations

import json

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import Fault
from conformance.scenarios import new_script, run, workspace


def _second_run_restores(impl, first_faults: tuple, first_ok: bool):
    folder = workspace()
    name = "resume-me"
    first = new_script(impl, folder, journal="first", steps=3, faults=first_faults)
    r1 = run(impl, first, num_workers=1, folder=folder, name=name)
    if first_ok:
        assertions.succeeded(r1.outcome, r1.setting)
        latest = 2
    else:
        assertions.failed(r1.outcome, impl.train.TrainingFailedError, r1.setting)
        latest = max(e["step"] for e in r1.events("reported"))
    second = new_script(impl, folder, journal="second", steps=5)
    r2 = run(impl, second, num_workers=1, folder=folder, name=name)
    setting = f"{r2.setting}, second fit() of name={name!r}"
    result = assertions.succeeded(r2.outcome, setting)
    (start,) = r2.events("start")
    assertions.equal((start["restored"] or {}).get("step"), latest,
                     "step of get_checkpoint() at the start of the second fit()", setting)
    assertions.equal(result.metrics["step"], 4, "result.metrics['step'] of the second fit()",
                     setting)


@clause("resume.by-name")
def check_resume_after_finished_run(impl):
    _second_run_restores(impl, (), first_ok=True)


@clause("resume.by-name")
def check_resume_after_failed_run(impl):
    _second_run_restores(impl, (Fault("raise", rank=0, report=2),), first_ok=False)



@clause("resume.snapshot-write-failure")
def check_a_failed_snapshot_write_keeps_the_last_registered_checkpoint(impl):
    # num_to_keep=1: registering step 2 ('doomed-2') would evict step 1, the latest so far;
    # the file system refuses every snapshot that names 'doomed', so that registration fails
    import os

    from conformance.failing_fs import snapshot_failing_filesystem

    t = impl.train
    folder, name = workspace(), "snapshot-write-fails"
    storage = os.path.join(folder, "storage")
    names = {0: "ok-0", 1: "ok-1", 2: "doomed-2", 3: "ok-3"}
    config = t.CheckpointConfig(num_to_keep=1)
    first = new_script(impl, folder, journal="first", steps=4, dir_names=names)
    r1 = run(impl, first, num_workers=1, folder=folder, name=name, storage=storage,
             checkpoint_config=config,
             storage_filesystem=snapshot_failing_filesystem("doomed"))
    setting = f"{r1.setting}, storage_filesystem failing the snapshot that names 'doomed-2'"
    assertions.failed(r1.outcome, t.ControllerError, setting)
    run_dir = os.path.join(storage, name)
    files = sorted(n for n in os.listdir(run_dir)
                   if not os.path.isdir(os.path.join(run_dir, n)))
    assertions.equal(files, [".validate_storage_marker", "checkpoint_manager_snapshot.json"],
                     "files (not folders) in the run folder after the failed snapshot write",
                     setting)
    assertions.equal(sorted(os.listdir(os.path.join(run_dir, "ok-1"))), ["shard-0.json"],
                     "files of step 1's checkpoint (the latest registered) after the failed "
                     "registration that would have evicted it", setting)
    second = new_script(impl, folder, journal="second", steps=4, list_reported=True)
    r2 = run(impl, second, num_workers=1, folder=folder, name=name, storage=storage,
             checkpoint_config=config)
    setting2 = f"{r2.setting}, second fit() of name={name!r} on the local file system"
    result = assertions.succeeded(r2.outcome, setting2)
    (start,) = r2.events("start")
    assertions.equal((start["restored"] or {}).get("step"), 1,
                     "step of get_checkpoint() at the start of the second fit()", setting2)
    listed = [x["name"] for e in r2.events("listed") for x in e["listed"]]
    assertions.equal("doomed-2" in listed, False,
                     "whether get_all_reported_checkpoints() of the second fit() lists the "
                     "checkpoint whose registration failed", setting2)
    kept = [os.path.basename(c.path.rstrip("/")) for c, _ in result.best_checkpoints]
    assertions.equal(len(kept), 1, "len(result.best_checkpoints) of the second fit()",
                     setting2)
    assertions.equal("doomed-2" in kept + [os.path.basename(result.checkpoint.path)], False,
                     "whether the second fit()'s Result names the checkpoint whose "
                     "registration failed", setting2)


def _corrupted(doc: dict, kind: str) -> str:
    """The snapshot text `doc` gives after one corruption of kind `kind`."""
    if kind == "not JSON":
        return "{not json"
    if kind == "checkpoint_report_indices one short":
        doc["checkpoint_report_indices"] = doc["checkpoint_report_indices"][:-1]
    elif kind == "checkpoint_report_indices one too many":
        doc["checkpoint_report_indices"].append(doc["current_report_index"])
    elif kind == "a report index 0.5":
        doc["checkpoint_report_indices"][0] = 0.5
    elif kind == "latest_checkpoint_result names an unlisted folder":
        doc["latest_checkpoint_result"]["checkpoint_dir_name"] = "not-listed"
    elif kind == "validated_checkpoint_dir_names holds an int":
        doc["validated_checkpoint_dir_names"] = [1]
    elif kind == "an entry without metrics":
        del doc["checkpoint_results"][0]["metrics"]
    elif kind == "a pending_validation_specs entry without a pending result":
        doc["pending_validation_specs"] = [True]
    elif kind == "a pending result without a pending_validation_specs entry":
        doc["pending_training_results"] = [doc["checkpoint_results"][0]]
        doc["pending_validation_specs"] = []
    elif kind == "a pending result naming an unlisted folder":
        doc["pending_training_results"] = [
            dict(doc["checkpoint_results"][0], checkpoint_dir_name="not-listed")]
        doc["pending_validation_specs"] = [True]
    elif kind == "validated_checkpoint_dir_names is a string":
        doc["validated_checkpoint_dir_names"] = "ckpt-0000"
    elif kind == "current_report_index is a word":
        doc["current_report_index"] = "many"
    elif kind == "checkpoint_results is an object":
        doc["checkpoint_results"] = {}
    return json.dumps(doc)


CORRUPTIONS = (
    "not JSON", "checkpoint_report_indices one short",
    "checkpoint_report_indices one too many", "a report index 0.5",
    "latest_checkpoint_result names an unlisted folder",
    "validated_checkpoint_dir_names holds an int", "an entry without metrics",
    "a pending_validation_specs entry without a pending result",
    "a pending result without a pending_validation_specs entry",
    "a pending result naming an unlisted folder", "current_report_index is a word",
    "validated_checkpoint_dir_names is a string",
    "checkpoint_results is an object",
)


def _finished_run(impl, folder: str, name: str, steps: int):
    """A 1-worker run of `steps` checkpointed steps that succeeded: (run, the path of its
    snapshot, the snapshot's text)."""
    import os

    first = new_script(impl, folder, journal="first", steps=steps)
    r1 = run(impl, first, num_workers=1, folder=folder, name=name)
    assertions.succeeded(r1.outcome, r1.setting)
    path = os.path.join(r1.run_dir, "checkpoint_manager_snapshot.json")
    with open(path) as f:
        return r1, path, f.read()


def _second_fit_refused(impl, folder: str, name: str, journal: str, snapshot_path: str,
                        snapshot: str, why: str) -> str:
    """A second fit() of `name` must fail before any worker runs the training function and
    leave the snapshot as `snapshot`; returns the setting it ran in."""
    second = new_script(impl, folder, journal=journal, steps=4)
    r2 = run(impl, second, num_workers=1, folder=folder, name=name)
    setting = f"{r2.setting}, second fit() of name={name!r} {why}"
    assertions.equal(r2.outcome.ok, False, "fit() failed", setting)
    assertions.equal(len(r2.events("start")), 0,
                     "workers that started the training function", setting)
    with open(snapshot_path) as f:
        assertions.equal(f.read() == snapshot, True, "the snapshot is left as it was",
                         setting)
    return setting


@clause("resume.corrupt-snapshot")
def check_a_corrupt_snapshot_stops_the_resumed_fit_before_training(impl):

    folder, name = workspace(), "corrupt"
    r1, path, good = _finished_run(impl, folder, name, steps=2)
    for i, kind in enumerate(CORRUPTIONS):
        text = _corrupted(json.loads(good), kind)
        with open(path, "w") as f:
            f.write(text)
        setting = _second_fit_refused(impl, folder, name, f"second-{i}", path, text,
                                      f"after its snapshot got {kind}")
        try:
            impl.train.Result.from_path(r1.run_dir)
        except Exception:  # noqa: BLE001 - the contract fixes no class
            pass
        else:
            raise AssertionError(f"Result.from_path(run folder) returned, expected it to "
                                 f"raise [{setting}]")
        with open(path, "w") as f:
            f.write(good)


@clause("resume.missing-checkpoint")
def check_a_listed_folder_gone_stops_the_resumed_fit_before_training(impl):
    import os
    import shutil

    import pytest

    folder, name = workspace(), "missing-folder"
    r1, path, snapshot = _finished_run(impl, folder, name, steps=3)
    shutil.rmtree(os.path.join(r1.run_dir, "ckpt-0000"))  # not the latest checkpoint
    setting = _second_fit_refused(impl, folder, name, "second", path, snapshot,
                                  "after the folder ckpt-0000 its snapshot lists was deleted")
    assertions.equal(sorted(os.listdir(r1.run_dir)),
                     sorted([".validate_storage_marker", "checkpoint_manager_snapshot.json",
                             "ckpt-0001", "ckpt-0002"]),
                     "entries of the run folder after the failed fit()", setting)
    with pytest.raises(Exception) as raised:  # noqa: PT011 - the contract fixes no class
        impl.train.Result.from_path(r1.run_dir)
    assertions.equal("ckpt-0000" in str(raised.value), True,
                     f"the missing folder named in Result.from_path's error "
                     f"{str(raised.value)[-300:]!r}", setting)
