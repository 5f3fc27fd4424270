"""`barrier()` and `broadcast_from_rank_zero(data)`: collectives across the ranks of a run,
carried by the run's own channel (no framework process group is needed).

Every rank must make the same collective calls in the same order: each call waits until all
ranks have made it. In local mode both return at once (`broadcast_from_rank_zero` returns
its argument). On a worker a payload over 1000 bytes (pickled) is only warned about, as in
Ray.
"""

from __future__ import annotations

import logging
from typing import Optional, TypeVar

import cloudpickle

from reference.train._internal.session import get_session

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=Optional[object])

#: a broadcast of more than this many pickled bytes is warned about (Ray's limit)
MAX_BROADCAST_SIZE_BYTES = 1000


def broadcast_from_rank_zero(data: T) -> T:
    """Rank 0's `data` on every rank (the other ranks' arguments are ignored); a barrier."""
    session = get_session("broadcast_from_rank_zero")
    if data is not None and session.distributed:  # local mode returns data unchecked, as Ray
        size = len(cloudpickle.dumps(data))
        if size > MAX_BROADCAST_SIZE_BYTES:  # Ray's message, then the fix
            logger.warning(
                "Data size %d bytes exceeds the maximum broadcast size of %d bytes; "
                "broadcast small values (a path, a few numbers) and put large data in "
                "storage.", size, MAX_BROADCAST_SIZE_BYTES)
    return session.collective("broadcast", data)


def barrier() -> None:
    """Return once every rank has called barrier()."""
    get_session("barrier").collective("barrier", None)
