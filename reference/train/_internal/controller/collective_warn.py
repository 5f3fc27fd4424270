"""How often a report round that not every rank has reached is logged: Ray Train's
environment variable, read as Ray reads it."""

from __future__ import annotations

import logging
import os
from typing import Mapping

# the controller's logger: the warning is the controller's, whichever module reads it
logger = logging.getLogger("reference.train._internal.controller.controller")

#: Ray Train's variable for how often a rank-synchronizing call that not every rank has
#: reached is logged (ray/train/v2/_internal/constants.py; read by
#: execution/worker_group/worker_group.py:WorkerGroup.__init__ and applied by
#: execution/checkpoint/sync_actor.py:SynchronizationActor.broadcast_from_rank_zero,
#: which every report() enters). Default 60 s there too.
COLLECTIVE_WARN_INTERVAL_S_ENV_VAR = "RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S"
DEFAULT_COLLECTIVE_WARN_INTERVAL_S = 60.0


def collective_warn_interval_s(environ: Mapping[str, str] = os.environ) -> float:
    """The report-wait warning interval from the environment, as Ray reads it: a value that
    is not a number is logged and the default used. Unlike Ray, a value <= 0 (which would
    log without pause there) is treated the same way."""
    raw = environ.get(COLLECTIVE_WARN_INTERVAL_S_ENV_VAR)
    if raw is None:
        return DEFAULT_COLLECTIVE_WARN_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        logger.warning("%s=%r is not a positive number of seconds; using the default %s s.",
                       COLLECTIVE_WARN_INTERVAL_S_ENV_VAR, raw,
                       DEFAULT_COLLECTIVE_WARN_INTERVAL_S)
        return DEFAULT_COLLECTIVE_WARN_INTERVAL_S
    return value
