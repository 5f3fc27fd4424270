"""Checkpoint validation: a report with validation=True, the ValidationConfig's function,
its metrics merged and the checkpoint ranked again (clause `validation.merge-and-rank`).

One worker reports a checkpoint at every step with validation=True and journals
get_all_reported_checkpoints() (VALIDATED consistency: it returns once no validation is
pending) after each report, so every validation settles before the next report and the
listing after each step is exact. The oracle replays Ray's manager: a checkpoint is
registered without the validation's metric (scored -inf, protected while pending), the
validation's dict is merged into its metrics and it moves to its new place, a failed
validation leaves metrics and place as they were, and retention runs after each change.
"""

from __future__ import annotations

import math
import os

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import slow_validation, validate_checkpoint, validation_wait_probe
from conformance.scenarios import TrainerFactory, new_script, run, workspace


def replay(values: list, num_to_keep: int, order: str) -> list[list[dict]]:
    """The listing (worst -> best) after each step's report and validation."""
    factor = 1.0 if order == "max" else -1.0
    entries: dict[int, dict] = {}  # step -> metrics, status, pending

    def key(step):
        score = factor * entries[step]["metrics"].get("val", -math.inf)
        return (not math.isnan(score), -math.inf if math.isnan(score) else score, step)

    def retain(latest):
        ranked = sorted(entries, key=key)
        for step in ranked[:-num_to_keep]:
            if step != latest and entries[step]["status"] != "PENDING_VALIDATION":
                del entries[step]

    listings = []
    for step, value in enumerate(values):
        entries[step] = {"metrics": {"step": step, "rank": 0, "attempt": 0},
                         "status": "PENDING_VALIDATION"}
        retain(step)
        if value is None:
            entries[step]["status"] = "VALIDATION_FAILED"
        else:
            entries[step]["status"] = "VALIDATED"
            entries[step]["metrics"]["val"] = value
        retain(step)
        listings.append([{"name": f"ckpt-{s:04d}", "metrics": dict(entries[s]["metrics"]),
                          "status": entries[s]["status"], "types_ok": True}
                         for s in sorted(entries, key=key)])
    return listings


def _check(impl, values: list, num_to_keep: int, order: str):
    t = impl.train
    folder = workspace()
    steps = len(values)
    script = new_script(impl, folder, steps=steps, validate=tuple(range(steps)),
                        list_reported=True)
    validation = t.ValidationConfig(
        validate_checkpoint, task_config=t.ValidationTaskConfig(fn_kwargs={"values": values}))
    config = t.CheckpointConfig(num_to_keep=num_to_keep, checkpoint_score_attribute="val",
                                checkpoint_score_order=order)
    r = run(impl, script, num_workers=1, folder=folder, checkpoint_config=config,
            validation_config=validation)
    setting = (f"{r.setting}, report(..., validation=True) at every step, validation "
               f"values {values} (None: the function raises)")
    result = assertions.succeeded(r.outcome, setting)
    expected = replay(values, num_to_keep, order)
    listed = {e["step"]: e["listed"] for e in r.events("listed") if e["step"] is not None}
    for step in range(steps):
        assertions.equal(listed.get(step), expected[step],
                         f"get_all_reported_checkpoints() after the report of step {step} "
                         "(folder name, metrics, status)", setting)
    final = [e["name"] for e in expected[-1]]
    on_disk = sorted(n for n in os.listdir(r.run_dir) if n.startswith("ckpt-"))
    assertions.equal(on_disk, sorted(final), "checkpoint folders on disk", setting)
    best = [(os.path.basename(c.path.rstrip("/")), m.get("val"))
            for c, m in result.best_checkpoints]
    assertions.equal(best, [(e["name"], e["metrics"].get("val"))
                            for e in expected[-1][-num_to_keep:]],
                     "result.best_checkpoints (folder, merged 'val')", setting)


@clause("validation.merge-and-rank")
def check_validated_metrics_merge_and_rank(impl):
    # 3 stays the best; 1 is evicted when the next checkpoint registers; the failed
    # validation keeps its -inf place and is evicted when the next one registers
    _check(impl, [3.0, 1.0, None, 2.0], num_to_keep=1, order="max")


@clause("validation.merge-and-rank")
def check_validated_metrics_rank_under_min(impl):
    _check(impl, [2.0, None, 0.5, 1.0], num_to_keep=2, order="min")


@clause("validation.merge-and-rank")
def check_a_validation_settling_later_evicts_and_deletes(impl):
    # no waiting between reports: checkpoint 0 (val 1) can only be evicted when a
    # validation settles (once checkpoint 1's val 3 is known), whatever the timing; after
    # fit() every validation settled and only the best (1) and the latest (2) remain
    t = impl.train
    folder = workspace()
    values = [1.0, 3.0, 2.0]
    script = new_script(impl, folder, steps=3, validate=(0, 1, 2))
    validation = t.ValidationConfig(
        validate_checkpoint, task_config=t.ValidationTaskConfig(fn_kwargs={"values": values}))
    r = run(impl, script, num_workers=1, folder=folder, name="validated",
            checkpoint_config=t.CheckpointConfig(num_to_keep=1,
                                                 checkpoint_score_attribute="val"),
            validation_config=validation)
    setting = f"{r.setting}, report(..., validation=True) at steps 0-2, values {values}"
    result = assertions.succeeded(r.outcome, setting)
    on_disk = sorted(n for n in os.listdir(r.run_dir) if n.startswith("ckpt-"))
    assertions.equal(on_disk, ["ckpt-0001", "ckpt-0002"], "checkpoint folders on disk", setting)
    best = [(os.path.basename(c.path.rstrip("/")), m.get("val"))
            for c, m in result.best_checkpoints]
    assertions.equal(best, [("ckpt-0001", 3.0)], "result.best_checkpoints", setting)
    # a resumed run lists the earlier run's checkpoints with the statuses they ended in
    again = new_script(impl, folder, journal="second", steps=4, list_reported=True)
    r2 = run(impl, again, num_workers=1, folder=folder, name="validated",
             checkpoint_config=t.CheckpointConfig(num_to_keep=1,
                                                  checkpoint_score_attribute="val"),
             validation_config=validation)
    setting2 = f"{r2.setting}, the second fit() of the same name"
    assertions.succeeded(r2.outcome, setting2)
    (first,) = [e["listed"] for e in r2.events("listed") if e["step"] is None]
    assertions.equal([(e["name"], e["status"], e["metrics"].get("val")) for e in first],
                     [("ckpt-0002", "VALIDATED", 2.0), ("ckpt-0001", "VALIDATED", 3.0)],
                     "get_all_reported_checkpoints() at the start of the resumed run",
                     setting2)


@clause("resume.snapshot-write-failure")
def check_a_failed_snapshot_write_of_a_validation_is_validated_again(impl):
    # num_to_keep=1: step 1's validation (val 424242.5) would evict step 0 (val 3); the file
    # system refuses every snapshot holding '424242.5', so merging that result fails
    from conformance.failing_fs import snapshot_failing_filesystem

    t = impl.train
    folder, name = workspace(), "validation-write-fails"
    storage = os.path.join(folder, "storage")
    values = [3.0, 424242.5, 1.0]
    validation = t.ValidationConfig(
        validate_checkpoint, task_config=t.ValidationTaskConfig(fn_kwargs={"values": values}))
    config = t.CheckpointConfig(num_to_keep=1, checkpoint_score_attribute="val")
    first = new_script(impl, folder, journal="first", steps=2, validate=(0, 1))
    r1 = run(impl, first, num_workers=1, folder=folder, name=name, storage=storage,
             checkpoint_config=config, validation_config=validation,
             storage_filesystem=snapshot_failing_filesystem("424242.5"))
    setting = (f"{r1.setting}, validation values {values[:2]}, storage_filesystem failing "
               "the snapshot that holds 424242.5")
    assertions.failed(r1.outcome, t.ControllerError, setting)
    run_dir = os.path.join(storage, name)
    assertions.equal(sorted(os.listdir(os.path.join(run_dir, "ckpt-0000"))), ["shard-0.json"],
                     "files of step 0's checkpoint, which the failed validation result "
                     "would have evicted", setting)
    second = new_script(impl, folder, journal="second", steps=3, validate=(2,))
    r2 = run(impl, second, num_workers=1, folder=folder, name=name, storage=storage,
             checkpoint_config=config, validation_config=validation)
    setting2 = f"{r2.setting}, second fit() of name={name!r} on the local file system"
    result = assertions.succeeded(r2.outcome, setting2)
    (start,) = r2.events("start")
    assertions.equal((start["restored"] or {}).get("step"), 1,
                     "step of get_checkpoint() at the start of the second fit()", setting2)
    best = [(os.path.basename(c.path.rstrip("/")), m.get("val"))
            for c, m in result.best_checkpoints]
    assertions.equal(best, [("ckpt-0001", 424242.5)],
                     "result.best_checkpoints of the second fit() (step 1 validated again)",
                     setting2)
    on_disk = sorted(n for n in os.listdir(r2.run_dir) if n.startswith("ckpt-"))
    assertions.equal(on_disk, ["ckpt-0001", "ckpt-0002"],
                     "checkpoint folders on disk after the second fit()", setting2)


#: how long the validation of check_validated_listing_waits_up_to_timeout takes, and the
#: timeout_s of its bounded get_all_reported_checkpoints call
SLOW_VALIDATION_S, LISTING_TIMEOUT_S = 3.0, 1.0


@clause("report.validated-timeout")
def check_validated_listing_waits_up_to_timeout(impl):
    t = impl.train
    folder = workspace()
    validation = t.ValidationConfig(slow_validation, task_config=t.ValidationTaskConfig(
        fn_kwargs={"seconds": SLOW_VALIDATION_S}))
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=validation_wait_probe,
        train_loop_config={"train": t.__name__, "timeout_s": LISTING_TIMEOUT_S},
        scaling_config=t.ScalingConfig(num_workers=1), validation_config=validation,
        run_config=t.RunConfig(name="validated-wait", storage_path=os.path.join(folder, "s"))))
    setting = (f"{impl.name}: DataParallelTrainer(num_workers=1), one report(..., "
               f"validation=True) whose validation takes {SLOW_VALIDATION_S} s, then "
               "get_all_reported_checkpoints(COMMITTED), (timeout_s="
               f"{LISTING_TIMEOUT_S}) and ()")
    result = assertions.succeeded(impl.fit(factory), setting)
    seen = result.return_value
    pending, validated = ["PENDING_VALIDATION"], ["VALIDATED"]
    assertions.equal([seen[k][1] for k in ("committed", "timeout", "validated")],
                     [pending, pending, validated],
                     "statuses listed by the COMMITTED, the timeout_s and the default call",
                     setting)
    waited = seen["timeout"][0]
    if not LISTING_TIMEOUT_S - 0.1 <= waited < SLOW_VALIDATION_S - 1.0:
        raise AssertionError(
            f"get_all_reported_checkpoints(timeout_s={LISTING_TIMEOUT_S}) returned after "
            f"{waited:.2f} s while the validation was pending; expected about "
            f"{LISTING_TIMEOUT_S} s (at least {LISTING_TIMEOUT_S - 0.1}, under "
            f"{SLOW_VALIDATION_S - 1.0}) [{setting}]")
