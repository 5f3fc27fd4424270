"""Checkpoint retention: num_to_keep, score attribute and order (clauses `retention.*`).

The oracle replays Ray's rule one registration at a time: the list is kept ordered
worst -> best by (not NaN, score x order factor, report index), a missing score counts as
-inf *before* the factor is applied, a NaN score ranks below every number, and after each
registration the worst entries beyond num_to_keep are evicted except the latest.
"""

from __future__ import annotations

import math
import os

from hypothesis import example, given
from hypothesis import strategies as st

from conformance import assertions
from conformance.catalogue import clause
from conformance.scenarios import new_script, run, workspace
from conformance.settings import fit_settings

MISSING = None


def oracle(scores: list, num_to_keep: int | None, order: str, scored: bool):
    """(retained steps worst->best, best_checkpoints steps) after all registrations."""
    factor = 1.0 if order == "max" else -1.0

    def key(step):
        if not scored:
            return (True, 0.0, step)
        v = scores[step]
        score = factor * (float("-inf") if v is MISSING else v)
        if math.isnan(score):  # below everything, whatever the order
            return (False, float("-inf"), step)
        return (True, score, step)

    kept: list[int] = []
    for step in range(len(scores)):
        kept = sorted(kept + [step], key=key)
        if num_to_keep is not None:
            worst = kept[:-num_to_keep]
            kept = [s for s in kept if s not in worst or s == step]
    best = kept if num_to_keep is None else kept[-num_to_keep:]
    return kept, best


def _metrics(scores: list, nested: bool) -> dict:
    out = {}
    for step, v in enumerate(scores):
        if v is MISSING:
            out[step] = {}
        elif nested:
            out[step] = {"eval": {"score": v}}
        else:
            out[step] = {"score": v}
    return out


def _check(impl, scores, num_to_keep, order, attribute):
    t = impl.train
    folder = workspace()
    nested = attribute == "eval/score"
    script = new_script(impl, folder, steps=len(scores), metrics=_metrics(scores, nested))
    config = t.CheckpointConfig(num_to_keep=num_to_keep, checkpoint_score_attribute=attribute,
                                checkpoint_score_order=order)
    r = run(impl, script, num_workers=1, folder=folder, checkpoint_config=config)
    setting = f"{r.setting}, scores={scores}"
    result = assertions.succeeded(r.outcome, setting)
    kept, best = oracle(scores, num_to_keep, order, attribute is not None)
    on_disk = sorted(n for n in os.listdir(r.run_dir) if n.startswith("ckpt-"))
    assertions.equal(on_disk, sorted(f"ckpt-{s:04d}" for s in kept), "checkpoint folders on disk",
                     setting)
    seen_best = [os.path.basename(c.path.rstrip("/")) for c, _ in result.best_checkpoints]
    assertions.equal(seen_best, [f"ckpt-{s:04d}" for s in best], "result.best_checkpoints",
                     setting)
    assertions.equal(os.path.basename(result.checkpoint.path.rstrip("/")),
                     f"ckpt-{len(scores) - 1:04d}", "result.checkpoint (the latest)", setting)


@clause("retention.best-plus-latest")
def check_retention_property(impl):
    score = st.sampled_from([0.0, 1.0, 2.0, 3.0, -1.5])

    @fit_settings(impl)
    @given(
        scores=st.lists(score, min_size=1, max_size=5),
        num_to_keep=st.one_of(st.none(), st.integers(1, 3)),
        order=st.sampled_from(["max", "min"]),
        attribute=st.sampled_from([None, "score"]),
    )
    @example(scores=[3.0, 1.0, 2.0], num_to_keep=1, order="max", attribute="score")
    def prop(scores, num_to_keep, order, attribute):
        _check(impl, scores, num_to_keep, order, attribute)

    prop()


@clause("retention.missing-score", "retention.nested-score")
def check_missing_nested_score_max(impl):
    _check(impl, [2.0, MISSING, 1.0, 3.0], 2, "max", "eval/score")


@clause("retention.missing-score")
def check_missing_score_min(impl):
    _check(impl, [2.0, MISSING, 1.0, 3.0], 1, "min", "score")


@clause("retention.non-finite-score")
def check_non_finite_scores_property(impl):
    nan, inf = float("nan"), float("inf")
    score = st.sampled_from([nan, inf, -inf, 0.0, 1.0, MISSING])

    @fit_settings(impl)
    @given(
        scores=st.lists(score, min_size=2, max_size=5),
        num_to_keep=st.integers(1, 2),
        order=st.sampled_from(["max", "min"]),
    )
    # the clause's example; NaN below a missing score (-inf) and two NaNs, under 'min'
    @example(scores=[nan, 1.0, -inf], num_to_keep=1, order="max")
    @example(scores=[MISSING, nan, 0.0, nan, 1.0], num_to_keep=2, order="min")
    @example(scores=[inf, 0.0, -inf, nan], num_to_keep=1, order="min")
    def prop(scores, num_to_keep, order):
        _check(impl, scores, num_to_keep, order, "score")

    prop()


def _resumed(impl, first: list, second: list, num_to_keep: int, order: str):
    """Two fits of one (storage_path, name): the first reports `first` as a-<step>, the
    second resumes from its latest and reports `second` as b-<step>; judged as one
    registration sequence."""
    t = impl.train
    folder, name = workspace(), "resume-retention"
    config = t.CheckpointConfig(num_to_keep=num_to_keep, checkpoint_score_attribute="score",
                                checkpoint_score_order=order)
    # steps are numbered across both runs: the second resumes after the first's latest
    scores = first + second
    names = [f"{'a' if s < len(first) else 'b'}-{s:04d}" for s in range(len(scores))]
    result = None
    for journal, steps in (("first", len(first)), ("second", len(scores))):
        script = new_script(impl, folder, journal=journal, steps=steps,
                            metrics=_metrics(scores, nested=False),
                            dir_names=dict(enumerate(names)))
        r = run(impl, script, num_workers=1, folder=folder, name=name,
                checkpoint_config=config)
        setting = (f"{r.setting}, fit() {journal} of name={name!r}, scores: first "
                   f"{first}, second {second}")
        result = assertions.succeeded(r.outcome, setting)
    (start,) = r.events("start")
    assertions.equal((start["restored"] or {}).get("step"), len(first) - 1,
                     "step of get_checkpoint() at the start of the second fit()", setting)
    kept, best = oracle(scores, num_to_keep, order, scored=True)
    on_disk = sorted(n for n in os.listdir(r.run_dir) if n.startswith(("a-", "b-")))
    assertions.equal(on_disk, sorted(names[i] for i in kept),
                     "checkpoint folders on disk after the second fit()", setting)
    seen_best = [os.path.basename(c.path.rstrip("/")) for c, _ in result.best_checkpoints]
    assertions.equal(seen_best, [names[i] for i in best],
                     "result.best_checkpoints of the second fit()", setting)


@clause("resume.retention")
def check_resumed_run_keeps_ranking_earlier_checkpoints(impl):
    # the first run's best outranks everything the second reports; its latest is evicted
    # once it is no longer the latest
    _resumed(impl, [5.0, 1.0, 2.0], [3.0, 0.0], num_to_keep=2, order="max")


@clause("resume.nan-score")
def check_resumed_run_keeps_a_nan_scored_latest_ranked_worst(impl):
    # the first run ends on a NaN score (kept as its latest); the resumed run reads it back
    # as NaN, ranks it below everything and evicts it at its first report
    _resumed(impl, [1.0, float("nan")], [0.5, 2.0], num_to_keep=1, order="max")


@clause("resume.retention")
def check_resumed_run_ties_go_to_the_later_report(impl):
    # equal scores across the two runs: the report index continues, so the later is better
    _resumed(impl, [1.0, 1.0], [1.0, 2.0, 1.0], num_to_keep=2, order="min")


@clause("retention.shared-name")
def check_a_folder_two_checkpoints_name_stays_while_one_is_kept(impl):
    # steps 0 and 1 both report into 'shared'; step 1 evicts step 0 but is the latest;
    # step 2 ('other') evicts step 1, and only then may 'shared' go
    t = impl.train
    folder = workspace()
    names = {0: "shared", 1: "shared", 2: "other"}
    script = new_script(impl, folder, steps=3, dir_names=names, list_reported=True)
    r = run(impl, script, num_workers=1, folder=folder,
            checkpoint_config=t.CheckpointConfig(num_to_keep=1))
    setting = f"{r.setting}, checkpoint_dir_name per step {names}"
    assertions.succeeded(r.outcome, setting)
    after = {e["step"]: e for e in r.events("reported")}
    listed = {e["step"]: [x["name"] for x in e["listed"]] for e in r.events("listed")}
    assertions.equal(listed.get(1), ["shared"], "checkpoints listed after step 1", setting)
    # the probe journals, after each report, whether get_checkpoint()'s folder exists
    assertions.equal(after[1].get("checkpoint_files"), ["shard-0.json"],
                     "files of get_checkpoint() after step 1 (its folder 'shared' is also "
                     "the evicted step 0's)", setting)
    on_disk = sorted(n for n in os.listdir(r.run_dir) if not n.startswith("."))
    assertions.equal(on_disk, ["checkpoint_manager_snapshot.json", "other"],
                     "run folder after step 2 evicted the last checkpoint named 'shared'",
                     setting)


@clause("retention.no-leftovers")
def check_a_finished_run_folder_holds_only_the_kept_folders(impl):
    t = impl.train
    folder = workspace()
    script = new_script(impl, folder, steps=4, nested=True)
    r = run(impl, script, num_workers=2, folder=folder,
            checkpoint_config=t.CheckpointConfig(num_to_keep=1))
    setting = f"{r.setting}, every rank passes shard-<r>.json and more/ at each of 4 reports"
    assertions.succeeded(r.outcome, setting)
    entries = os.listdir(r.run_dir)
    folders = sorted(n for n in entries if os.path.isdir(os.path.join(r.run_dir, n)))
    assertions.equal(folders, ["ckpt-0003"], "folders in the run folder after fit()", setting)
    kept = os.path.join(r.run_dir, "ckpt-0003")
    assertions.equal(sorted(os.listdir(kept)), ["more", "shard-0.json", "shard-1.json"],
                     "entries of the kept ckpt-0003", setting)
