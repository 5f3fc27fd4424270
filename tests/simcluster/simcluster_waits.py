"""Deadlines for the multi-process simcluster tests (a module of its own: `conftest` is a
name several test folders use, so importing from it picks whichever was imported first)."""

from __future__ import annotations

import time

from simcluster.procfs import state as proc_state


def wait_until(predicate, timeout: float = 10.0, what: str = "condition"):
    """Poll `predicate` with a deadline (for facts no event announces: /proc states)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.005)


def gone(pid: int) -> bool:
    return proc_state(pid) in (None, "Z")
