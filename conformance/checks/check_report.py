"""report(): who calls it, what it persists, where (clauses `report.*`)."""

from __future__ import annotations

import os

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.scenarios import basic_run, new_script, no_checkpoint_run, run, workspace


@clause("report.outside-raises")
def check_outside_training_function(impl):
    t = impl.train
    with pytest.raises(RuntimeError):
        t.report({"a": 1})
    with pytest.raises(RuntimeError):
        t.get_context()
    with pytest.raises(RuntimeError):
        t.get_checkpoint()


@clause("report.barrier")
def check_report_waits_for_every_rank(impl):
    run = basic_run(impl)
    assertions.succeeded(run.outcome, run.setting)
    for e in run.events("reported"):
        assertions.equal(e["peers_arrived"], [0, 1],
                         f"ranks that had called report when rank {e['rank']}'s report of step "
                         f"{e['step']} returned", run.setting + ", rank 1 arrives 1 s late")


@clause("report.rank0-metrics", "report.free-metrics")
def check_result_metrics_are_rank0_latest_checkpointed(impl):
    run = basic_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    # step 3 reported metrics without a checkpoint: they must not show up
    assertions.equal(result.metrics, {"step": 2, "rank": 0, "attempt": 0}, "result.metrics",
                     run.setting)


@clause("report.free-metrics", "result.best-checkpoints", "result.metrics-dataframe")
def check_metric_only_run_has_no_metrics(impl):
    run = no_checkpoint_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    assertions.equal(result.metrics, None, "result.metrics", run.setting)
    assertions.equal(result.checkpoint, None, "result.checkpoint", run.setting)
    assertions.equal(list(result.best_checkpoints or []), [], "result.best_checkpoints",
                     run.setting)
    assertions.equal(result.metrics_dataframe, None, "result.metrics_dataframe", run.setting)
    with pytest.raises(RuntimeError):
        result.get_best_checkpoint("step", "max")


@clause("report.merge-ranks")
def check_checkpoints_of_ranks_merge_under_rank0_name(impl):
    run = basic_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    path = result.checkpoint.path
    assertions.equal(os.path.basename(path.rstrip("/")), "ckpt-0002",
                     "latest checkpoint folder name", run.setting)
    assertions.equal(sorted(os.listdir(path)), ["shard-0.json", "shard-1.json"],
                     "files in the merged checkpoint", run.setting)


@clause("report.same-name")
def check_a_report_into_an_earlier_checkpoints_folder_merges(impl):
    from conformance.scenarios import new_script, run, workspace

    folder = workspace()
    names = {0: "same", 1: "same"}
    script = new_script(impl, folder, steps=2, dir_names=names, nested=True,
                        checkpoints={0: (0, 1), 1: (0,)})
    r = run(impl, script, num_workers=2, folder=folder)
    setting = (f"{r.setting}, checkpoint_dir_name 'same' at steps 0 (ranks 0 and 1) and 1 "
               "(rank 0 alone); each rank writes shard-<r>.json, more/a-<r>.json and "
               "more/b-<r>.json")
    assertions.succeeded(r.outcome, setting)
    found = _written_steps(os.path.join(r.run_dir, "same"))
    expected = {"shard-0.json": 1, "more/a-0.json": 1, "more/b-0.json": 1,
                "shard-1.json": 0, "more/a-1.json": 0, "more/b-1.json": 0}
    assertions.equal(found, expected, "{file: step it was written at} in the folder 'same'",
                     setting)


def _written_steps(root: str) -> dict:
    """{relative path: the step its probe file was written at} of every file under root."""
    import json

    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path) as f:
                found[os.path.relpath(path, root)] = json.load(f)["step"]
    return found


@clause("report.delete-local")
def check_delete_local_moves_every_ranks_files(impl):
    folder = workspace()
    script = new_script(impl, folder, steps=2, nested=True, delete_local=(1,))
    r = run(impl, script, num_workers=2, folder=folder)
    setting = (f"{r.setting}, every rank passes a local folder holding shard-<r>.json, "
               "more/a-<r>.json and more/b-<r>.json at steps 0 and 1; step 1 reports with "
               "delete_local_checkpoint_after_upload=True")
    assertions.succeeded(r.outcome, setting)
    files = {rank: [f"shard-{rank}.json", f"more/a-{rank}.json", f"more/b-{rank}.json"]
             for rank in (0, 1)}
    for step in (0, 1):
        assertions.equal(_written_steps(os.path.join(r.run_dir, f"ckpt-{step:04d}")),
                         {name: step for rank in (0, 1) for name in files[rank]},
                         f"{{file: step it was written at}} in ckpt-{step:04d}", setting)
    for rank in (0, 1):
        kept = os.path.join(script.journal_dir, "local", f"a0-r{rank}-s0")
        assertions.equal(sorted(_written_steps(kept)), sorted(files[rank]),
                         f"rank {rank}'s local folder of step 0 (uploaded without deletion)",
                         setting)
        gone = os.path.join(script.journal_dir, "local", f"a0-r{rank}-s1")
        assertions.equal(os.path.exists(gone), False,
                         f"rank {rank}'s local folder of step 1 exists after its upload",
                         setting)


@clause("report.same-name", "checkpoint.round-trip")
def check_folders_of_any_name_keep_their_place(impl):
    """Names that sort before '.' (a leading '-' or '+'): a checkpoint folder and subfolders
    so named, an empty folder, and a later report merging into them (each checkpoint also
    holds rank 0's shard-0.json)."""
    from conformance import strategies as s
    from conformance.scenarios import new_script, run, workspace

    first = {"a": b"1", "-sub": {"b": b"2"}, "empty": {}}
    merged = {"-s": {"a": b"1"}}
    second = {"-s": {"b": b"2"}, "+t": {"c": b"3"}}
    folder = workspace()
    script = new_script(impl, folder, steps=3, checkpoints={0: (0,), 1: (0,), 2: (0,)},
                        dir_names={0: "-dash", 1: "same", 2: "same"},
                        trees={0: first, 1: merged, 2: second})
    r = run(impl, script, num_workers=1, folder=folder)
    setting = (f"{r.setting}, step 0 reports {first!r} as '-dash'; steps 1 and 2 report "
               f"{merged!r} then {second!r} as 'same'")
    result = assertions.succeeded(r.outcome, setting)

    def tree(name: str) -> dict:  # rank 0's shard-0.json aside
        found = s.read_tree(os.path.join(r.run_dir, name))
        found.pop("shard-0.json", None)
        return found

    assertions.equal(tree("-dash"), first, "the tree of the folder '-dash'", setting)
    assertions.equal(tree("same"), {"-s": {"a": b"1", "b": b"2"}, "+t": {"c": b"3"}},
                     "the tree of the folder 'same'", setting)
    assertions.equal(os.path.basename(result.checkpoint.path.rstrip("/")), "same",
                     "result.checkpoint's folder", setting)


def _described(root: str) -> dict:
    """{relative path: bytes, 'folder', or ('link', target)} of everything under root."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = "folder"
            else:
                with open(path, "rb") as f:
                    out[rel] = f.read()
    return out


@clause("report.symlinks")
def check_links_are_stored_as_what_they_point_to(impl):
    from conformance.scenarios import new_script, run, workspace

    tree = {"flink": ("symlink", b"T"), "dlink": ("symlink", {"in": b"D"}),
            "sub": {"deep": ("symlink", b"X")}}
    stored = {"flink": b"T", "dlink": "folder", "dlink/in": b"D", "sub": "folder",
              "sub/deep": b"X"}
    folder = workspace()
    script = new_script(impl, folder, steps=2, checkpoints={0: (0,), 1: (0,)},
                        trees={0: tree, 1: tree}, delete_local=(1,))
    r = run(impl, script, num_workers=1, folder=folder)
    setting = (f"{r.setting}, rank 0's checkpoint holds links to a file and a folder "
               "outside it (and one in a subfolder); step 1 reports with "
               "delete_local_checkpoint_after_upload=True")
    assertions.succeeded(r.outcome, setting)
    for step in (0, 1):
        found = _described(os.path.join(r.run_dir, f"ckpt-{step:04d}"))
        found.pop("shard-0.json", None)
        assertions.equal(found, stored, f"what ckpt-{step:04d} holds", setting)
    local = os.path.join(script.journal_dir, "local", "a0-r0-s1")
    assertions.equal(os.path.exists(local), False,
                     "step 1's local checkpoint folder exists after its upload", setting)
    targets = _described(f"{local}-targets")
    assertions.equal(sorted(v for v in targets.values() if isinstance(v, bytes)),
                     [b"D", b"T", b"X"], "the files the links pointed to, after the upload",
                     setting)


@clause("report.nonzero-rank-checkpoint")
def check_checkpoint_from_rank1_only(impl):
    run = basic_run(impl)
    assertions.succeeded(run.outcome, run.setting)
    folder = os.path.join(run.run_dir, "ckpt-0000")
    assertions.equal(os.path.isdir(folder), True, f"{folder} exists", run.setting)
    assertions.equal(sorted(os.listdir(folder)), ["shard-1.json"],
                     "files of the checkpoint only rank 1 passed", run.setting)


@clause("report.layout")
def check_on_disk_layout(impl):
    run = basic_run(impl)
    assertions.succeeded(run.outcome, run.setting)
    assertions.equal(sorted(os.listdir(run.storage)), [run.name], "entries of storage_path",
                     run.setting)
    assertions.equal(
            sorted(os.listdir(run.run_dir)),
            [".validate_storage_marker", "checkpoint_manager_snapshot.json", "ckpt-0000",
             "ckpt-0002"],
            f"entries of {run.run_dir}", run.setting)


@clause("report.get-checkpoint")
def check_get_checkpoint_follows_reports(impl):
    run = basic_run(impl)
    assertions.succeeded(run.outcome, run.setting)
    for s in run.events("start"):
        assertions.equal(s["restored"], None, f"rank {s['rank']} get_checkpoint() at start",
                         run.setting)
    # after each report carrying this rank's checkpoint, get_checkpoint() is that checkpoint
    passed = {(0, 2): "ckpt-0002", (1, 0): "ckpt-0000", (1, 2): "ckpt-0002"}
    for e in run.events("reported"):
        want = passed.get((e["rank"], e["step"]))
        if want is None:
            continue
        got = e["checkpoint_path"]
        assertions.equal(got and os.path.basename(got.rstrip("/")), want,
                         f"rank {e['rank']} get_checkpoint() after report of step {e['step']}",
                         run.setting)


def _failed_first_report(impl, checkpoints=None, **script):
    """A one-report run whose report must fail on rank 0 (by default the rank that passes
    the checkpoint): (run, rank 0's exception)."""
    folder = workspace()
    r = run(impl, new_script(impl, folder, steps=1, checkpoints=checkpoints or {0: (0,)},
                             **script),
            num_workers=2, folder=folder)
    err = assertions.failed(r.outcome, impl.train.WorkerGroupError, r.setting)
    return r, err.worker_failures.get(0)


def _only_marker_left(r) -> None:
    __tracebackhide__ = True
    assertions.equal(sorted(os.listdir(r.run_dir)), [".validate_storage_marker"],
                     f"entries of {r.run_dir} after the failed report", r.setting)


@clause("report.dir-name-length")
def check_long_dir_name_fails_on_the_rank(impl):
    name = "a" * 300
    r, error = _failed_first_report(impl, dir_names={0: name})
    setting = f"{r.setting}, rank 0 reports checkpoint_dir_name='a' * 300"
    assertions.equal(type(error).__name__, "ValueError", "rank 0's exception type", setting)
    text = str(error)
    assertions.equal(("checkpoint_dir_name" in text, "255" in text), (True, True),
                     f"('checkpoint_dir_name' named, limit 255 named) in {text[-300:]!r}",
                     setting)
    _only_marker_left(r)


@clause("report.unstorable-metrics")
def check_unstorable_metrics_fail_before_staging(impl):
    import numpy as np

    # what Ray 2.60's snapshot cannot hold: an arbitrary object, numpy scalars that are not
    # a float subclass, bytes that are not UTF-8
    for value, kind in ((object(), "object"), (np.float32(1.5), "float32"),
                        (b"\xff", "bytes")):
        r, error = _failed_first_report(impl, metrics={0: {"obj": value}})
        setting = f"{r.setting}, rank 0 reports metrics {{'obj': {value!r}}} with a checkpoint"
        assertions.equal(type(error).__name__, "TypeError", "rank 0's exception type",
                         setting)
        text = str(error)
        assertions.equal(("'obj'" in text, kind in text), (True, True),
                         f"(key 'obj' named, type {kind} named) in {text[-300:]!r}", setting)
        _only_marker_left(r)


@clause("report.unstorable-metrics")
def check_unstorable_metrics_fail_when_only_another_rank_stages(impl):
    r, error = _failed_first_report(impl, checkpoints={0: (1,)},
                                    metrics={0: {"obj": object()}})
    setting = (f"{r.setting}, rank 0 reports metrics {{'obj': object()}} without a "
               "checkpoint while rank 1 passes one")
    assertions.equal(type(error).__name__, "TypeError", "rank 0's exception type", setting)
    assertions.equal("'obj'" in str(error), True,
                     f"key 'obj' named in {str(error)[-300:]!r}", setting)
    _only_marker_left(r)
