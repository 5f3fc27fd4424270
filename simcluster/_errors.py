"""The simcluster exception tree.

    SimclusterError                 base of everything simcluster raises on purpose
    ├── Unschedulable               a placement request cannot be placed
    │   └── PlacementTimeout        ... within `timeout_s` (also a TimeoutError)
    ├── NodeDownError               the node named in a call is down (or unknown)
    ├── WorkerStartError            a node could not start a worker process
    ├── ChannelClosed               the other end of a message channel is gone (also EOFError)
    ├── AuthenticationError         a peer failed the cluster-secret handshake
    └── RemoteError                 stands in for a worker's outcome that could not be pickled

Ordinary argument mistakes raise `ValueError` / `TypeError` naming the argument, the value and
what is allowed.
"""

from __future__ import annotations


class SimclusterError(Exception):
    """Base class of the errors simcluster raises on purpose."""


class Unschedulable(SimclusterError):
    """Raised when a placement request can never fit on the cluster's current nodes."""


class PlacementTimeout(Unschedulable, TimeoutError):
    """Raised when a request that could fit did not get free resources within `timeout_s`."""


class NodeDownError(SimclusterError):
    """Raised when a call names a node that is down or unknown."""


class WorkerStartError(SimclusterError):
    """Raised when a node fails to start a worker process (or does not answer in time)."""


class ChannelClosed(SimclusterError, EOFError):
    """Raised by `recv`/`send` once the other end of the channel has gone away."""


class AuthenticationError(SimclusterError):
    """Raised on the connecting side when the cluster refuses its secret (or vice versa)."""


class RemoteError(SimclusterError):
    """Stands in for a worker's exception or return value that could not cross the channel."""
