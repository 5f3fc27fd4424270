"""A simulated multi-node cluster on one machine, with fault injection and a history.

See `simcluster.api` for the interface, `simcluster.worker` for what runs inside a worker,
and `simcluster.checkers` for verdicts over a cluster's history.
"""

from ._client import ClusterClient, connect
from ._cluster import Cluster
from ._endpoint import Bundle, Channel, Placement, WorkerExit, WorkerHandle
from ._errors import (
    AuthenticationError,
    ChannelClosed,
    NodeDownError,
    PlacementTimeout,
    RemoteError,
    SimclusterError,
    Unschedulable,
    WorkerStartError,
)
from ._history import History
from ._placement import STRATEGIES
from ._spec import Node, NodeSpec

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "Bundle",
    "Channel",
    "ChannelClosed",
    "Cluster",
    "ClusterClient",
    "History",
    "Node",
    "NodeDownError",
    "NodeSpec",
    "Placement",
    "PlacementTimeout",
    "RemoteError",
    "STRATEGIES",
    "SimclusterError",
    "Unschedulable",
    "WorkerExit",
    "WorkerHandle",
    "WorkerStartError",
    "connect",
]
