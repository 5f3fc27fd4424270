"""What a function started by `Cluster.start_worker` can use inside its worker process.

    from simcluster import worker
    info = worker.current()      # WorkerInfo: worker_id, name, node_id, node_address, ...
    ch = worker.channel()        # ch.send(obj); ch.recv(timeout=None) -> obj

Both raise RuntimeError outside a simcluster worker.
"""

from ._worker_side import WorkerChannel, WorkerInfo, channel, current

__all__ = ["WorkerChannel", "WorkerInfo", "channel", "current"]
