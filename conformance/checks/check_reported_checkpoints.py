"""What a training function learns about the checkpoints it reported, and reports that
register a checkpoint in place (clauses `report.all-reported-checkpoints`,
`report.no-upload`).

One shared run: two workers, CheckpointConfig(num_to_keep=2), five reports. Both ranks
checkpoint at steps 0 and 3, rank 1 alone at step 2, nobody at step 1, and at step 4 both
ranks write their shards straight into `<run>/inplace-0004` and report it with NO_UPLOAD.
Every rank journals get_all_reported_checkpoints() at its start and after every report.
"""

from __future__ import annotations

import inspect
import os

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import no_upload_probe
from conformance.scenarios import TrainerFactory, new_script, run, shared, workspace

NUM_TO_KEEP = 2
CHECKPOINTED = {0: "ckpt-0000", 2: "ckpt-0002", 3: "ckpt-0003", 4: "inplace-0004"}


def _listing_run(impl):
    def build(impl):
        folder = workspace()
        script = new_script(impl, folder, steps=5, checkpoints={0: (0, 1), 2: (1,), 3: (0, 1)},
                            in_place={4: (0, 1)}, list_reported=True)
        return run(impl, script, num_workers=2, folder=folder,
                   checkpoint_config=impl.train.CheckpointConfig(num_to_keep=NUM_TO_KEEP))

    return shared(impl, "reported-checkpoints", build)


def expected_listing(step: int | None) -> list[dict]:
    """What every rank lists after the report of `step` (None: at the start)."""
    done = [s for s in CHECKPOINTED if step is not None and s <= step]
    # Without a score attribute the latest is always among the k most recent.
    kept = done[-NUM_TO_KEEP:]
    return [{"name": CHECKPOINTED[s], "metrics": {"step": s, "rank": 0, "attempt": 0},
             "status": "COMMITTED", "types_ok": True} for s in kept]


@clause("report.all-reported-checkpoints")
def check_listing_follows_every_report(impl):
    r = _listing_run(impl)
    assertions.succeeded(r.outcome, r.setting)
    listed = r.events("listed")
    assertions.equal({(e["rank"], e["step"]) for e in listed},
                     {(rank, step) for rank in (0, 1) for step in (None, 0, 1, 2, 3, 4)},
                     "(rank, step) of the get_all_reported_checkpoints() calls journalled",
                     r.setting)
    for e in sorted(listed, key=lambda e: (e["rank"], -1 if e["step"] is None else e["step"])):
        when = "at the start" if e["step"] is None else f"after the report of step {e['step']}"
        assertions.equal(e["listed"], expected_listing(e["step"]),
                         f"rank {e['rank']}'s get_all_reported_checkpoints() {when} "
                         "(folder name, metrics, status, ReportedCheckpoint types)", r.setting)


@clause("report.all-reported-checkpoints")
def check_listing_signature_and_types(impl):
    t = impl.train
    params = [(p.name, p.default) for p in
              inspect.signature(t.get_all_reported_checkpoints).parameters.values()]
    assertions.equal(params, [("consistency_mode", t.CheckpointConsistencyMode.VALIDATED),
                              ("timeout_s", None)],
                     "parameters of get_all_reported_checkpoints", impl.name)
    statuses = sorted(m.name for m in t.ReportedCheckpointStatus)
    assertions.equal(statuses, ["COMMITTED", "PENDING_VALIDATION", "VALIDATED",
                                "VALIDATION_FAILED", "VALIDATION_TIMEOUT"],
                     "members of ReportedCheckpointStatus", impl.name)
    made = t.ReportedCheckpoint(checkpoint=None, metrics={"a": 1},
                                status=t.ReportedCheckpointStatus.COMMITTED)
    assertions.equal((made.checkpoint, made.metrics, made.status),
                     (None, {"a": 1}, t.ReportedCheckpointStatus.COMMITTED),
                     "ReportedCheckpoint(checkpoint, metrics, status) fields", impl.name)


@clause("report.no-upload")
def check_no_upload_registers_in_place(impl):
    r = _listing_run(impl)
    result = assertions.succeeded(r.outcome, r.setting)
    for e in r.events("reported"):
        if e["step"] == 4:
            assertions.equal(e["same_object"], True,
                             f"rank {e['rank']}: get_checkpoint() is the Checkpoint object "
                             "passed with NO_UPLOAD", r.setting)
    in_place = os.path.join(r.run_dir, "inplace-0004")
    assertions.equal(os.path.realpath(result.checkpoint.path), os.path.realpath(in_place),
                     "result.checkpoint.path (the folder reported with NO_UPLOAD)", r.setting)
    assertions.equal(sorted(os.listdir(r.run_dir)),
                     [".validate_storage_marker", "checkpoint_manager_snapshot.json",
                      "ckpt-0003", "inplace-0004"],
                     f"entries of {r.run_dir} (nothing copied under rank 0's ckpt-0004)",
                     r.setting)
    assertions.equal(sorted(os.listdir(in_place)), ["shard-0.json", "shard-1.json"],
                     "files of the in-place checkpoint", r.setting)


@clause("report.no-upload")
def check_no_upload_refuses_a_folder_outside_the_run(impl):
    t = impl.train
    folder = workspace()
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=no_upload_probe, train_loop_config={"train": t.__name__},
        scaling_config=t.ScalingConfig(num_workers=1),
        run_config=t.RunConfig(name="no-upload", storage_path=os.path.join(folder, "s"))))
    setting = (f"{impl.name}: DataParallelTrainer(num_workers=1); report(NO_UPLOAD) of a "
               "folder outside the run folder, the exception caught")
    result = assertions.succeeded(impl.fit(factory), setting)
    assertions.equal(result.return_value, {"outside": "ValueError"},
                     "what report(NO_UPLOAD) of a folder outside the run folder raised "
                     "(type name; None: it returned)", setting)
    assertions.equal(result.checkpoint, None, "result.checkpoint", setting)
