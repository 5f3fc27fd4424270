"""`TuneReportCallback`: forwards a Train run's reports to the Tune trial it runs in.

Use it in the function trainable that builds and fits a Trainer:
`train.RunConfig(name=f"train-trial_id={tune.get_context().get_trial_id()}",
callbacks=[TuneReportCallback()])`. After each consolidated Train report, rank 0's metrics
become one `tune.report` of the trial (so `training_iteration` counts Train reports), with
`checkpoint_path` added when the report carried a checkpoint. The trial itself reports no
checkpoint: the Train run holds them, and a restarted trial resumes its Train run by its
name, as in Ray 2.60. The report waits for the Tuner's answer, so a scheduler's STOP ends
the trial (and its Train workers) before the next Train step.
"""

from __future__ import annotations

from reference.train import UserCallback
from reference.tune import _session

CHECKPOINT_PATH_KEY = "checkpoint_path"


class TuneReportCallback(UserCallback):
    def __init__(self):
        if _session.current() is None:
            raise RuntimeError("TuneReportCallback must be used in a Tune session.")

    def after_report(self, run_context, metrics, checkpoint) -> None:
        result = dict(metrics[0])
        if checkpoint:
            result[CHECKPOINT_PATH_KEY] = checkpoint.path
        _session.current().report(result)
