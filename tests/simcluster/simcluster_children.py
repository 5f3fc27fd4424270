"""Worker functions that start processes of every kind a training function may start (run
inside simcluster workers by the descendant tests; a module of its own so that a driver
script in another process can use them too)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import time

from simcluster import worker

KINDS = ("popen", "multiprocessing", "setsid_daemon")


def _sleep_forever() -> None:
    time.sleep(300)


def _daemon() -> int:
    """Double fork + setsid, the classic daemon: its own session and process group, so a
    killpg of the node's group misses it, and its parent is gone at once."""
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(r)
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            _sleep_forever()
            os._exit(0)
        os._exit(0)
    os.close(w)
    os.waitpid(first, 0)
    with os.fdopen(r, "rb") as f:
        return int(f.read())


def start_children() -> dict[str, int]:
    popen = subprocess.Popen(["sleep", "300"])
    child = multiprocessing.get_context("fork").Process(target=_sleep_forever, daemon=False)
    child.start()
    return {"popen": popen.pid, "multiprocessing": child.pid, "setsid_daemon": _daemon()}


def spawn_and_stay() -> None:
    """Start one child of every kind, send their pids, then run until killed."""
    worker.channel().send(start_children())
    _sleep_forever()


def spawn_and_fail() -> None:
    """Start one child of every kind, send their pids, then fail (a failed attempt)."""
    worker.channel().send(start_children())
    worker.channel().recv(30)  # the test has the pids
    raise RuntimeError("this attempt failed")
