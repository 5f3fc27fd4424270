"""What a function started by `Cluster.start_worker` can use inside its worker process.

    from simcluster import worker
    info = worker.current()      # WorkerInfo: worker_id, name, node_id, node_address, ...
    ch = worker.channel()        # ch.send(obj); ch.recv(timeout=None) -> obj

`current()` and `channel()` raise RuntimeError outside a simcluster worker. For fault plans:
`preemption()` (the deadline of a preemption notice for this node, or None),
`before_upload(path)` (a runtime calls it before each checkpoint upload: it raises or sleeps
when the plan says so) and `check_faults()` (raise an injected error now, if one is pending;
the channel's send/recv do the same). These three are no-ops outside a worker.
"""

from .node.worker_channel import WorkerChannel
from .node.worker_process import (
    WorkerInfo,
    before_upload,
    channel,
    check_faults,
    current,
    preemption,
)

__all__ = ["WorkerChannel", "WorkerInfo", "before_upload", "channel", "check_faults",
           "current", "preemption"]
