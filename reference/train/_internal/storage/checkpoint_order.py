"""The order of a run's checkpoints: worst -> best, as Ray Train 2.60 orders them.

Design note
-----------
Registered checkpoints form one list ordered worst -> best. Without `checkpoint_score_attribute` that is report order. With one, each checkpoint's score
is looked up in its metrics flattened with '/' (`{"a": {"b": 1}}` -> `"a/b"`); a missing key
scores -inf (logged, not raised); the score is multiplied by -1 under `"min"`, so a missing
key becomes the *best* under "min" (Ray's quirk, kept); NaN sorts below everything; equal
scores are ordered by report index (later = better). A value that is not a number raises
TypeError (or ValueError for array-likes), before any state changes. Deviations from Ray,
both where Ray's behaviour is a defect: Ray only notices a non-numeric score when it compares
two checkpoints (so the first one slips through); and a NaN score comes back from the snapshot
as null, which makes Ray's resumed run fail at its next checkpoint, so a null score of a
*restored* checkpoint is scored as NaN here.

Cost: a checkpoint's key is computed once (when it is registered or restored) and a new one is
placed by bisection over the keys, `(score key, report index)`. A restored list is used in its
stored order even when the score settings changed since it was written (as Ray does); such a
list may be out of order, and only then is it scanned linearly, which gives the same place
as Ray's scan.
"""

from __future__ import annotations

import bisect
import numbers
from typing import Any


def flatten_metrics(metrics: dict, delimiter: str = "/") -> dict:
    """`{"a": {"b": 1}}` -> `{"a/b": 1}`, level by level; a flattened key replaces an
    existing key of the same spelling (as Ray's flatten does)."""
    flat = dict(metrics)
    while True:
        nested = [k for k, v in flat.items() if isinstance(v, dict)]
        if not nested:
            return flat
        added = {}
        for key in nested:
            for sub, value in flat[key].items():
                added[f"{key}{delimiter}{sub}"] = value
        flat.update(added)
        for key in nested:
            del flat[key]


def score_key(flat: dict, attribute: str, factor: float, dir_name: str,
              restored: bool) -> tuple[bool, float]:
    """The sort key of a checkpoint whose flattened metrics are `flat` (raises, naming the
    checkpoint, for a score that is not a number). `factor` is 1 for "max", -1 for "min"."""
    if attribute not in flat:
        value: Any = float("-inf")
    else:
        value = flat[attribute]
        if value is None and restored:
            value = float("nan")  # written as null by the snapshot, see the design note
    try:
        score = factor * value
    except TypeError:
        raise TypeError(
            f"checkpoint_score_attribute={attribute!r} of checkpoint {dir_name!r} "
            f"is {value!r} ({type(value).__name__}); it must be a number. Report a "
            f"numeric {attribute!r} with every checkpoint or choose another "
            "CheckpointConfig(checkpoint_score_attribute=...)."
        ) from None
    if not isinstance(score, numbers.Real):
        raise ValueError(
            f"checkpoint_score_attribute={attribute!r} of checkpoint {dir_name!r} "
            f"is {value!r}; it must be a single number (use .item() for tensors/arrays)."
        )
    if score != score:  # NaN
        return (False, float("-inf"))
    return (True, score)


def insert_position(keys: list[tuple], new: tuple, in_order: bool) -> int:
    """Where `new` goes among `keys` (each `(score key, report index)`): before the first
    that ranks above it. `in_order` says `keys` is ascending, so that bisection applies."""
    if in_order:
        return bisect.bisect_right(keys, new)
    return next((i for i, key in enumerate(keys) if key > new), len(keys))


__all__ = ["flatten_metrics", "insert_position", "score_key"]
