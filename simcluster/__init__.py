"""A simulated multi-node cluster on one machine, with fault injection and a history.

See `simcluster.api` for the interface, `simcluster.worker` for what runs inside a worker,
`simcluster.checkers` for verdicts over a cluster's history, `simcluster.strategies` for
Hypothesis strategies of fault plans, and `python -m simcluster --help` for the CLI.
"""

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
from ._spec import Node, NodeSpec
from ._wire import dumps_by_value
from .driver.cluster import Cluster
from .driver.placement import STRATEGIES
from .faults.plan import ACTIONS, Action, FaultPlan, Trigger, action
from .faults.runner import PlanRun
from .frontend.client import ClusterClient, connect
from .frontend.endpoint import Bundle, Channel, Placement, WorkerExit, WorkerHandle
from .providers.base import Provider, RecordingProvider
from .providers.registry import PROVIDER_NAMES, provider_unavailable
from .tpu import tpu_slice

__version__ = "0.1.0"

__all__ = [
    "PROVIDER_NAMES",
    "provider_unavailable",
    "ACTIONS",
    "Action",
    "AuthenticationError",
    "Bundle",
    "Channel",
    "ChannelClosed",
    "Cluster",
    "ClusterClient",
    "FaultPlan",
    "History",
    "Node",
    "NodeDownError",
    "NodeSpec",
    "PlanRun",
    "Placement",
    "PlacementTimeout",
    "Provider",
    "RecordingProvider",
    "RemoteError",
    "STRATEGIES",
    "SimclusterError",
    "Trigger",
    "Unschedulable",
    "WorkerExit",
    "WorkerHandle",
    "WorkerStartError",
    "action",
    "connect",
    "dumps_by_value",
    "tpu_slice",
]
