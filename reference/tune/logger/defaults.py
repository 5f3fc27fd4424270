"""The loggers a Tuner adds by itself after the user's callbacks (Ray 2.60:
`ray/tune/utils/callback.py`): a CSV, a JSON and a TensorBoard logger, each unless the
user's list has one of that class, none with TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1."""

from __future__ import annotations

import logging
import os

from reference.tune.logger.csv import CSVLoggerCallback
from reference.tune.logger.json import JsonLoggerCallback
from reference.tune.logger.tensorboardx import TBXLoggerCallback

logger = logging.getLogger(__name__)

#: "1" turns the loggers a Tuner adds by itself off (Ray's variable)
DISABLE_AUTO_LOGGERS_ENV = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"


def default_callbacks(callbacks: list) -> list:
    """`callbacks` and, after them, a CSV, a JSON and a TensorBoard logger for each class
    the list has no instance of, unless TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1. Without
    tensorboardX there is no TensorBoard logger, and a warning says how to get one."""
    out = list(callbacks)
    if os.environ.get(DISABLE_AUTO_LOGGERS_ENV, "0") == "1":
        return out
    for cls in (CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback):
        if any(isinstance(cb, cls) for cb in callbacks):
            continue
        try:
            out.append(cls())
        except ImportError:
            logger.warning("The TensorBoard logger needs tensorboardX, which cannot be "
                           "imported: `pip install tensorboardX` to get TensorBoard files.")
    return out
