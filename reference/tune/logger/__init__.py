"""`reference.tune.logger`: the logger callbacks that write each trial's files.

`LoggerCallback` is the base (the Tune callback hooks call its `log_trial_*` hooks);
`CSVLoggerCallback` writes `progress.csv`, `JsonLoggerCallback` `result.json`, `params.json`
and `params.pkl`, `TBXLoggerCallback` TensorBoard event files. A Tuner adds each of the
three to `RunConfig(callbacks=...)` unless the list holds one of that class already or
`TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1` (`logger.defaults`), as Ray 2.60 does.
"""

from reference.tune.logger.csv import CSVLoggerCallback
from reference.tune.logger.json import JsonLoggerCallback
from reference.tune.logger.logger import LoggerCallback, pretty_print
from reference.tune.logger.tensorboardx import TBXLoggerCallback

__all__ = [
    "LoggerCallback",
    "pretty_print",
    "CSVLoggerCallback",
    "JsonLoggerCallback",
    "TBXLoggerCallback",
]
