"""`TBXLoggerCallback`: each trial's results as TensorBoard event files in its folder
(tensorboardX's `SummaryWriter`), and its searched hyperparameters with its last scalar
results as TensorBoard hparams when it ends.

Each flattened result key (without `config`, `pid`, `timestamp`, `time_total_s`,
`training_iteration`) is a tag `ray/tune/<key>` at step `timesteps_total` (or, without it,
`training_iteration`): numbers (bools among them; not NaN) as scalars; non-empty lists and
arrays as histograms, 3-, 4- and 5-dimensional arrays as an image, images and a video.
Other values (strings, None, NaN) are not written, as in Ray.
"""

from __future__ import annotations

import logging

from reference.tune.logger.logger import LoggerCallback, flatten_dict

logger = logging.getLogger(__name__)

SKIPPED = ("config", "pid", "timestamp", "time_total_s", "training_iteration")


def _scalar_types():
    import numpy as np

    return (int, float, np.float32, np.float64, np.int32, np.int64)


def _hparam_types():
    import numpy as np

    return (str, bool, int, float, list, type(None)), (np.bool_, np.float32, np.float64,
                                                         np.int32, np.int64)


class TBXLoggerCallback(LoggerCallback):
    _SAVED_FILE_TEMPLATES = ["events.out.tfevents.*"]

    def __init__(self):
        from tensorboardX import SummaryWriter  # ImportError without it, as in Ray

        self._writer_cls = SummaryWriter
        self._writers: dict = {}
        self._last: dict = {}  # trial -> its last result's written values

    def log_trial_start(self, trial) -> None:
        if trial in self._writers:
            self._writers[trial].close()
        self._writers[trial] = self._writer_cls(trial.local_path, flush_secs=30)
        self._last[trial] = {}

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        import numpy as np

        if trial not in self._writers:
            self.log_trial_start(trial)
        writer = self._writers[trial]
        step = result.get("timesteps_total") or result["training_iteration"]
        written = {}
        for key, value in flatten_dict({k: v for k, v in result.items()
                                   if k not in SKIPPED}).items():
            tag = f"ray/tune/{key}"
            if isinstance(value, _scalar_types()) and not np.isnan(value):
                written[tag] = value
                writer.add_scalar(tag, value, global_step=step)
            elif (isinstance(value, list) and value) or (isinstance(value, np.ndarray)
                                                         and value.size):
                written[tag] = value
                self._add_array(writer, tag, value, step)
        self._last[trial] = written
        writer.flush()

    @staticmethod
    def _add_array(writer, tag: str, value, step) -> None:
        import numpy as np

        ndim = value.ndim if isinstance(value, np.ndarray) else 0
        if ndim == 3:
            writer.add_image(tag, value, global_step=step)
        elif ndim == 4:
            writer.add_images(tag, value, global_step=step)
        elif ndim == 5:
            writer.add_video(tag, value, global_step=step, fps=20)
        else:
            try:
                writer.add_histogram(tag, value, global_step=step)
            except (ValueError, TypeError):
                logger.warning("A value tensorboardX cannot write as a histogram was left "
                               "out: %s=%r (%s).", tag, value, type(value).__name__)

    def log_trial_end(self, trial, failed: bool = False) -> None:
        if trial not in self._writers:
            return
        last = self._last.pop(trial, {})
        params = getattr(trial, "evaluated_params", None)
        if params and last:
            self._log_hparams(trial, {k: v for k, v in last.items()
                                      if isinstance(v, _scalar_types())})
        self._writers.pop(trial).close()

    def _log_hparams(self, trial, metrics: dict) -> None:
        from tensorboardX.summary import hparams

        plain, as_numpy = _hparam_types()
        flat = flatten_dict(trial.evaluated_params)
        kept = {k: v for k, v in flat.items() if isinstance(v, plain)}
        kept.update({k: v.tolist() for k, v in flat.items() if isinstance(v, as_numpy)})
        left_out = {k: v for k, v in flat.items() if not isinstance(v, plain + as_numpy)}
        if left_out:
            logger.info("Hyperparameters TensorBoard cannot show were left out: %s",
                        left_out)
        try:
            file_writer = self._writers[trial].file_writer
            for summary in hparams(hparam_dict=kept, metric_dict=metrics):
                file_writer.add_summary(summary)
        except Exception:  # noqa: BLE001 - as Ray: hparams are best effort, logged
            logger.exception("tensorboardX could not write the hyperparameters of %s",
                             trial)
