"""Checkpoint retention: num_to_keep, score attribute and order (clauses `retention.*`).

The oracle replays Ray's rule one registration at a time: the list is kept ordered
worst -> best by (score x order factor, report index), a missing score counts as -inf
*before* the factor is applied, and after each registration the worst entries beyond
num_to_keep are evicted except the latest.
"""

from __future__ import annotations

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
            return (0.0, step)
        v = scores[step]
        return (factor * (float("-inf") if v is MISSING else v), step)

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
