"""`reference.util.get_node_ip_address()`: the address of the node this process runs on
(``ray.util.get_node_ip_address``)."""

from __future__ import annotations

__all__ = ["get_node_ip_address"]


def get_node_ip_address() -> str:
    """In a worker: its node's address. In the driver: the address the cluster's workers
    reach the driver at (the host of the cluster's address), or 127.0.0.1 when no cluster
    is up. A service the driver starts for the workers (a tracker) listens there."""
    try:
        from simcluster import worker

        return worker.current().node_address
    except RuntimeError:  # not a cluster's worker
        pass
    from reference import _runtime

    cluster = _runtime._cluster
    address = getattr(cluster, "address", None) if cluster is not None else None
    if not address:
        return "127.0.0.1"
    host = address.rsplit(":", 1)[0]
    return host.strip("[]")
