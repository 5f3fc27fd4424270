"""Providers: where a node's processes run and what network they see.

A provider is a small object the driver consults at a few points: where the driver listens
(`open`), a node's address (`node_address`), what a node needs before it starts (`prepare`,
in the calling thread: it may block), how it is started (`spawn`, on the event-loop thread,
given the fields the node factory takes), and cutting / healing a node's network
(`set_cut`, for partitions), and how a node is killed (`kill`) and paused (`pause`): by
signals to its processes here; the docker provider freezes a container with `docker
pause`. `close` undoes what it set up.

    process   (default) every node a supervisor process on this machine, one loopback
              address each (127.0.0.2, ...); no partitions
    netns     each node in its own network namespace (`netns.py`); partitions
    docker    each node a container (`docker.py`); needs a running Docker engine

`RecordingProvider` is the fake for tests: a process provider whose partitions are only
recorded, so a plan's partition steps can be exercised where namespaces are unavailable.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from .. import _proc
from .._errors import SimclusterError
from .._spec import Node, node_address


class Provider:
    """The `process` provider, and the base class of the others."""

    name = "process"
    partitions = False

    def open(self, host: str) -> str:
        """Set up what nodes need; returns the address the driver listens on."""
        return host

    def node_address(self, index: int) -> str:
        return node_address(index)

    def prepare(self, node: Node) -> dict:
        """Set up for a new node (caller's thread); returns extra fields for `spawn`."""
        return {}

    def spawn(self, node: Node, fields: dict, factory, report: Callable[[dict], None]) -> None:
        """Start `node` (event-loop thread). `fields` are the factory's spawn command
        (node id and address, the driver's address, env, the cluster's `preload`);
        `report(event)` (any thread) takes factory-style events, e.g. {"node_id", "error"},
        for nodes that do not come from the factory."""
        factory.spawn(fields)

    def set_cut(self, node: Node, cut: bool) -> None:
        """Take the node's network link down (cut) or up again."""
        raise SimclusterError(f"partitions need provider='netns'; this cluster's provider is "
                              f"{self.name!r}: start it with Cluster(..., provider='netns')")

    def check_kill(self, pids: dict[str, int]) -> None:
        """Raise SimclusterError if `kill(pids)` could not be delivered (nothing to check for
        processes this driver forked itself)."""

    def kill(self, pids: dict[str, int]) -> None:
        """SIGKILL these nodes ({node id: supervisor pid}) and every process under them, at
        one instant: each group is stopped first, so no worker acts after it."""
        _proc.kill_trees(list(pids.values()))

    def pause(self, node: Node, pids: list[int], paused: bool) -> None:
        """Freeze (or thaw) the node; `pids`: its supervisor's first, then its workers'.
        Returns once they are all stopped (or running) or gone."""
        _proc.killpg(pids[0], signal.SIGSTOP if paused else signal.SIGCONT)
        _proc.wait_states(pids, want_stopped=paused, timeout_s=5.0)

    def close(self) -> None:
        """Remove whatever `open` and `spawn` created (idempotent)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RecordingProvider(Provider):
    """The process provider, with partitions recorded in `cuts` instead of enforced."""

    name = "recording"
    partitions = True

    def __init__(self) -> None:
        self.cuts: list[tuple[str, bool]] = []

    def set_cut(self, node: Node, cut: bool) -> None:
        self.cuts.append((node.id, cut))


def base36(n: int) -> str:
    """`n` in base 36: short, name-safe tags for links, namespaces, networks."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out
