"""A run on a filesystem passed as RunConfig(storage_filesystem=...): an object store (a
real S3-protocol server on loopback, clause `report.object-store`) and a pyarrow
SubTreeFileSystem over a local folder (clause `report.custom-filesystem`).

The checkpoints of a run on S3 cannot be renamed into place and exist only through the
run's snapshot; a SubTreeFileSystem is neither the local disk nor an object store, and its
paths are relative to its root. Each check follows one run there and a second fit() that
resumes it.
"""

from __future__ import annotations

import json

from conformance import assertions
from conformance.catalogue import clause
from conformance.checks.check_retention import oracle
from conformance.scenarios import new_script, run, workspace

SCORES = [3.0, 1.0, 2.0, 0.0]


def _entries(fs, path: str) -> dict:
    """{relative path: bytes} of every file under path on fs."""
    import pyarrow.fs as pafs

    out = {}
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as f:
                out[info.path[len(path):].lstrip("/")] = f.read()
    return out


def _shards(files: dict, folder: str) -> dict:
    """{shard file name: its JSON} of one checkpoint folder."""
    prefix = folder + "/"
    return {k[len(prefix):]: json.loads(v) for k, v in files.items()
            if k.startswith(prefix) and k[len(prefix):].startswith("shard-")}


@clause("report.object-store")
def check_run_on_an_object_store(impl, s3):
    fs, bucket = s3
    _run_twice_on(impl, fs, f"{bucket}/runs", "on-s3", workspace(),
                  "pyarrow S3FileSystem (moto on loopback)")


@clause("report.custom-filesystem")
def check_run_on_a_subtree_filesystem(impl):
    import os

    import pyarrow.fs as pafs

    folder = workspace()
    root = os.path.join(folder, "subtree-root")
    os.makedirs(root)
    fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
    _run_twice_on(impl, fs, "runs", "on-subtree", folder,
                  f"pyarrow SubTreeFileSystem({root!r}, LocalFileSystem())")
    # the run lives under the subtree's root, nowhere else in the working folder
    assertions.equal(sorted(os.listdir(root)), ["runs"],
                     f"entries of the SubTreeFileSystem's root {root!r}",
                     "storage_path='runs' on that SubTreeFileSystem")


def _run_twice_on(impl, fs, storage: str, name: str, folder: str, described: str) -> None:
    """One 2-worker run of SCORES with num_to_keep=2 on `fs` under `storage`, then a
    second fit() of the same name that resumes it."""
    import os

    t = impl.train
    run_dir = f"{storage}/{name}"
    config = t.CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="score")
    metrics = {step: {"score": v} for step, v in enumerate(SCORES)}
    first = new_script(impl, folder, journal="first", steps=len(SCORES), metrics=metrics,
                       delete_local=(1,))
    r1 = run(impl, first, num_workers=2, folder=folder, name=name, storage=storage,
             checkpoint_config=config, storage_filesystem=fs)
    setting = (f"{r1.setting}, storage_filesystem={described}, "
               f"storage_path={storage!r}, scores={SCORES}, step 1 reports with "
               "delete_local_checkpoint_after_upload=True")
    result = assertions.succeeded(r1.outcome, setting)
    local = os.path.join(first.journal_dir, "local")
    assertions.equal(sorted(n for n in os.listdir(local) if n.endswith("-s1")), [],
                     "step 1's local checkpoint folders after their upload", setting)
    assertions.equal(len([n for n in os.listdir(local) if n.endswith("-s0")]), 2,
                     "step 0's local checkpoint folders (kept: no delete asked)", setting)
    kept, best = oracle(SCORES, 2, "max", True)
    files = _entries(fs, run_dir)
    # every folder of the run folder (its files' first path parts), hidden ones included:
    # a temporary that outlives the run, or an evicted folder, is one too many
    folders = sorted({k.split("/")[0] for k in files if "/" in k})
    assertions.equal(folders, sorted(f"ckpt-{s:04d}" for s in kept),
                     f"checkpoint folders under {run_dir} on the run's filesystem", setting)
    for s in kept:
        got = {n: (v["step"], v["rank"]) for n, v in _shards(files, f"ckpt-{s:04d}").items()}
        assertions.equal(got, {"shard-0.json": (s, 0), "shard-1.json": (s, 1)},
                         f"(step, rank) of each file in ckpt-{s:04d} on the run's filesystem",
                         setting)
    seen_best = [c.path.rstrip("/").rsplit("/", 1)[-1] for c, _ in result.best_checkpoints]
    assertions.equal(seen_best, [f"ckpt-{s:04d}" for s in best], "result.best_checkpoints",
                     setting)
    latest = result.checkpoint
    assertions.equal(latest.path.rstrip("/").rsplit("/", 1)[-1], f"ckpt-{len(SCORES) - 1:04d}",
                     "result.checkpoint (the latest)", setting)
    local = latest.to_directory(os.path.join(folder, "downloaded"))
    assertions.equal(sorted(os.listdir(local)), ["shard-0.json", "shard-1.json"],
                     "files of result.checkpoint.to_directory()", setting)
    assertions.equal(type(latest.filesystem).__name__, type(fs).__name__,
                     "type of result.checkpoint.filesystem", setting)

    second = new_script(impl, folder, journal="second", steps=len(SCORES) + 1)
    r2 = run(impl, second, num_workers=2, folder=folder, name=name, storage=storage,
             checkpoint_config=config, storage_filesystem=fs)
    setting2 = f"{r2.setting}, second fit() of name={name!r} on the same {described}"
    result2 = assertions.succeeded(r2.outcome, setting2)
    (start,) = [e for e in r2.events("start") if e["rank"] == 0]
    assertions.equal((start["restored"] or {}).get("step"), len(SCORES) - 1,
                     "step of get_checkpoint() at the start of the second fit()", setting2)
    assertions.equal(result2.metrics["step"], len(SCORES),
                     "result.metrics['step'] of the second fit()", setting2)


@clause("report.uri-storage-path")
def check_a_file_uri_storage_path_is_the_local_folder(impl):
    import os

    folder, name = workspace(), "by-uri"
    local = os.path.join(folder, "uri-store")
    storage = f"file://{local}"
    t = impl.train
    script = new_script(impl, folder, journal="uri", steps=2)
    r = run(impl, script, num_workers=2, folder=folder, name=name, storage=storage,
            checkpoint_config=t.CheckpointConfig(num_to_keep=1))
    setting = f"{r.setting}, storage_path={storage!r}"
    result = assertions.succeeded(r.outcome, setting)
    run_dir = os.path.join(local, name)
    assertions.equal(result.path, run_dir, "result.path (the run folder, no scheme)", setting)
    assertions.equal(sorted(n for n in os.listdir(run_dir)
                            if os.path.isdir(os.path.join(run_dir, n))),
                     ["ckpt-0001"], f"folders of {run_dir} on the local disk", setting)
    latest = result.checkpoint
    assertions.equal(latest.path, os.path.join(run_dir, "ckpt-0001"),
                     "result.checkpoint.path", setting)
    assertions.equal(type(latest.filesystem).__name__, "LocalFileSystem",
                     "type of result.checkpoint.filesystem", setting)
    assertions.equal(sorted(os.listdir(latest.path)), ["shard-0.json", "shard-1.json"],
                     "files of result.checkpoint", setting)


def _nested_name_on(impl, fs, storage: str, described: str) -> None:
    """One report into checkpoint_dir_name 'epochs/0/e-0' (a folder two levels below folders
    that do not exist yet) on `fs`, then a second fit() that resumes from it."""
    folder, name = workspace(), "nested-name"
    first = new_script(impl, folder, journal="first", steps=1, dir_names={0: "epochs/0/e-0"})
    r1 = run(impl, first, num_workers=1, folder=folder, name=name, storage=storage,
             storage_filesystem=fs)
    setting = (f"{r1.setting}, storage_filesystem={described}, storage_path={storage!r}, "
               "checkpoint_dir_name='epochs/0/e-0'")
    result = assertions.succeeded(r1.outcome, setting)
    files = _entries(fs, f"{storage}/{name}")
    assertions.equal(sorted(k for k in files if k.startswith("epochs/")),
                     ["epochs/0/e-0/shard-0.json"],
                     "files under epochs/ in the run folder", setting)
    assertions.equal(result.checkpoint.path.rstrip("/").endswith("/epochs/0/e-0"), True,
                     f"result.checkpoint.path {result.checkpoint.path!r} ends with "
                     "'/epochs/0/e-0'", setting)
    second = new_script(impl, folder, journal="second", steps=2)
    r2 = run(impl, second, num_workers=1, folder=folder, name=name, storage=storage,
             storage_filesystem=fs)
    setting2 = f"{r2.setting}, second fit() of name={name!r} on the same {described}"
    assertions.succeeded(r2.outcome, setting2)
    (start,) = r2.events("start")
    assertions.equal((start["restored"] or {}).get("step"), 0,
                     "step of get_checkpoint() at the start of the second fit()", setting2)


@clause("report.object-store", "report.custom-filesystem")
def check_a_nested_dir_name_on_other_filesystems(impl, s3):
    import os

    import pyarrow.fs as pafs

    fs, bucket = s3
    _nested_name_on(impl, fs, f"{bucket}/nested", "pyarrow S3FileSystem (moto on loopback)")
    root = os.path.join(workspace(), "subtree-root")
    os.makedirs(root)
    _nested_name_on(impl, pafs.SubTreeFileSystem(root, pafs.LocalFileSystem()), "runs",
                    f"pyarrow SubTreeFileSystem({root!r}, LocalFileSystem())")
