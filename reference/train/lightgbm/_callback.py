"""RayTrainReportCallback for ``lightgbm.train`` and `normalize_pandas_for_lightgbm`.

Called after every boosting iteration on every rank, the callback reports the evaluation
results as `<dataset>-<metric>` (with ``lightgbm.cv``: `-mean` and `-stdv` pairs); see
reference/train/_internal/gbdt.py for `metrics` and `results_postprocessing_fn`. Rank 0
attaches a checkpoint holding `filename` (``Booster.save_model``, text) on the iterations
with (i + 1) % frequency == 0 and, with `checkpoint_at_end`, on the last one; the others
report metrics only. Unlike the XGBoost callback there is no extra report after training:
the last iteration's report carries the final checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Union

from lightgbm.basic import Booster

from reference.train._internal import gbdt


def normalize_pandas_for_lightgbm(df):
    """The frame with Arrow-backed numeric and boolean columns (which LightGBM rejects)
    turned into NumPy-nullable ones (Int64, UInt8, Float32, boolean, ...); other columns are
    left as they are, and a frame without Arrow columns is returned unchanged."""
    import pandas as pd
    import pyarrow as pa

    mapping = {}
    for column, dtype in df.dtypes.items():
        if not isinstance(dtype, pd.ArrowDtype):
            continue
        arrow = dtype.pyarrow_dtype
        if pa.types.is_signed_integer(arrow):
            mapping[column] = f"Int{arrow.bit_width}"
        elif pa.types.is_unsigned_integer(arrow):
            mapping[column] = f"UInt{arrow.bit_width}"
        elif pa.types.is_floating(arrow):
            mapping[column] = f"Float{arrow.bit_width}"
        elif pa.types.is_boolean(arrow):
            mapping[column] = "boolean"
    return df.astype(mapping, copy=False) if mapping else df


class RayTrainReportCallback:
    """Reports LightGBM's evaluation results (and checkpoints) to Train from every rank.

    Args:
        metrics: keys to report (a str or list, as logged) or a dict {report key: log key};
            None reports every `<dataset>-<metric>`.
        filename: the model file in each checkpoint (default "model.txt").
        frequency: checkpoint every this many iterations (0: only at the end).
        checkpoint_at_end: checkpoint on the last iteration.
        results_postprocessing_fn: rewrites the dict before it is reported.
    """

    CHECKPOINT_NAME = "model.txt"

    def __init__(
        self,
        metrics: Optional[Union[str, list[str], dict[str, str]]] = None,
        filename: str = CHECKPOINT_NAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Optional[
            Callable[[dict[str, Union[float, list[float]]]], dict[str, float]]] = None,
    ):
        self._metrics = gbdt.normalize_metrics_arg(metrics)
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._results_postprocessing_fn = results_postprocessing_fn

    @classmethod
    def get_model(cls, checkpoint, filename: str = CHECKPOINT_NAME) -> Booster:
        """The Booster saved in a checkpoint this callback reported."""
        with checkpoint.as_directory() as folder:
            return Booster(model_file=Path(folder, filename).as_posix())

    @staticmethod
    def _get_eval_result(env) -> dict:
        result: dict = {}
        for entry in env.evaluation_result_list:
            data_name, eval_name, value = entry[0:3]
            folds = len(entry) > 4  # lightgbm.cv: (..., is_higher_better, stdv of the folds)
            scores = result.setdefault(data_name, {})
            scores[eval_name + ("-mean" if folds else "")] = value
            if folds and entry[4] is not None:
                scores[eval_name + "-stdv"] = entry[4]
        return result

    def _get_report_dict(self, eval_result: dict) -> dict:
        return gbdt.select_metrics(gbdt.flatten_dict(eval_result, "-"), self._metrics,
                                   self._results_postprocessing_fn)

    def __call__(self, env) -> None:
        from reference.train import report

        metrics = self._get_report_dict(self._get_eval_result(env))
        last = env.iteration == env.end_iteration - 1
        checkpoint = (last and self._checkpoint_at_end) or (
            self._frequency != 0 and (env.iteration + 1) % self._frequency == 0)
        if not checkpoint:
            report(metrics)
            return
        with gbdt.rank0_checkpoint(env.model.save_model, self._filename) as folder:
            report(metrics, checkpoint=folder)
