"""RayTrainReportCallback for ``xgboost.train``: a report every boosting round, on every
rank; rank 0 attaches the model every `frequency` rounds and once more at the end.

After round i (0-based) the callback reports the evaluation log's last values, flattened
as `<eval name>-<metric>` (see reference/train/_internal/gbdt.py). With `frequency` > 0 the
report of every round i with (i + 1) % frequency == 0 carries a checkpoint holding
`filename` (saved by ``Booster.save_model``, so the suffix picks the format: "model.ubj"
UBJSON, "model.json" JSON). With `checkpoint_at_end` (the default) `after_training` makes
one more report with the last round's metrics and a checkpoint, unless the last round was
just checkpointed: with frequency=0 that is the only checkpoint.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Callable, Optional, Union

from xgboost.callback import TrainingCallback
from xgboost.core import Booster

from reference.train._internal import gbdt


class RayTrainReportCallback(TrainingCallback):
    """Reports xgboost's evaluation metrics (and checkpoints) to Train from every rank.

    Args:
        metrics: keys to report (a str or list, as logged) or a dict {report key: log key}
            renaming them; None reports every `<eval>-<metric>`.
        filename: the model file in each checkpoint (default "model.ubj").
        frequency: checkpoint every this many rounds (0: only at the end).
        checkpoint_at_end: report a final checkpoint after training.
        results_postprocessing_fn: rewrites the (flattened, selected) dict before it is
            reported.
    """

    CHECKPOINT_NAME = "model.ubj"

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
        self._evals_log = None
        self._last_checkpoint_iteration = None

    @classmethod
    def get_model(cls, checkpoint, filename: str = CHECKPOINT_NAME) -> Booster:
        """The Booster saved in a checkpoint this callback reported."""
        with checkpoint.as_directory() as folder:
            booster = Booster()
            booster.load_model(Path(folder, filename).as_posix())
            return booster

    def _get_report_dict(self, evals_log) -> dict:
        if isinstance(evals_log, OrderedDict):  # xgboost's log: lists of values per round
            result = {k: v[-1] for k, v in gbdt.flatten_dict(evals_log, "-").items()}
        else:
            result = dict(evals_log)
        return gbdt.select_metrics(result, self._metrics, self._results_postprocessing_fn)

    def _report(self, metrics: dict, model: Booster | None) -> None:
        from reference.train import report

        if model is None:
            report(metrics)
            return
        with gbdt.rank0_checkpoint(model.save_model, self._filename) as checkpoint:
            report(metrics, checkpoint=checkpoint)

    def after_iteration(self, model: Booster, epoch: int, evals_log) -> bool:
        self._evals_log = evals_log
        checkpoint = self._frequency != 0 and (epoch + 1) % self._frequency == 0
        metrics = self._get_report_dict(evals_log)
        if checkpoint:
            self._last_checkpoint_iteration = epoch
        self._report(metrics, model if checkpoint else None)
        return False

    def after_training(self, model: Booster) -> Booster:
        if not self._checkpoint_at_end:
            return model
        if (self._last_checkpoint_iteration is not None
                and model.num_boosted_rounds() - 1 == self._last_checkpoint_iteration):
            return model
        metrics = self._get_report_dict(self._evals_log) if self._evals_log else {}
        self._report(metrics, model)
        return model
