"""What the XGBoost and LightGBM report callbacks share: the metrics dict they report and
the checkpoint only rank 0 attaches.

Metric keys are the evaluation log flattened with "-" (`{"train": {"rmse": ..}}` ->
`"train-rmse"`); `metrics` picks keys (a str or list: reported under the same name) or
renames them (a dict {report key: log key}; a missing key is a KeyError, as in Ray); then
`results_postprocessing_fn` may rewrite the dict.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Callable

from reference.train._checkpoint import Checkpoint


def flatten_dict(nested: dict, delimiter: str = "-") -> dict:
    """Nested dicts flattened into one level, keys joined with `delimiter`."""
    flat: dict = {}
    nested_items = []
    for key, value in nested.items():
        if isinstance(value, dict):
            nested_items.append((key, value))
        else:
            flat[key] = value
    for key, value in nested_items:
        for sub, item in flatten_dict(value, delimiter).items():
            flat[f"{key}{delimiter}{sub}"] = item
    return flat


def normalize_metrics_arg(metrics):
    return [metrics] if isinstance(metrics, str) else metrics


def select_metrics(result: dict, metrics, postprocess: Callable | None) -> dict:
    if not metrics:
        report = dict(result)
    elif isinstance(metrics, dict):
        report = {key: result[log_key] for key, log_key in metrics.items()}
    else:
        report = {key: result[key] for key in metrics}
    return postprocess(report) if postprocess else report


@contextlib.contextmanager
def rank0_checkpoint(save: Callable[[str], None], filename: str):
    """A checkpoint folder holding `filename` (written by save(path)) on world rank 0 (and
    in local mode); None on the other ranks."""
    from reference.train import get_context

    if get_context().get_world_rank() in (0, None):
        with tempfile.TemporaryDirectory() as folder:
            save(Path(folder, filename).as_posix())
            yield Checkpoint.from_directory(folder)
    else:
        yield None


_LEGACY = ("The legacy {name} API is deprecated. Please switch to passing in a custom "
           "`train_loop_per_worker` function instead. See this issue for more context: "
           "https://github.com/ray-project/ray/issues/50042")


def reject_legacy_arguments(trainer: str, label_column, params, num_boost_round) -> None:
    """The V1 trainer's arguments raise DeprecationWarning (raised, as in Ray)."""
    if label_column is not None or params is not None or num_boost_round is not None:
        raise DeprecationWarning(_LEGACY.format(name=trainer))


def deprecated_get_model(trainer: str):
    raise DeprecationWarning(f"`{trainer}.get_model` is deprecated. "
                             "Use `RayTrainReportCallback.get_model` instead.")
