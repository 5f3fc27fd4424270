"""The driver side of workers: handles, exits, channels and placements, for whoever owns them.

Both `Cluster` (in the process that runs the cluster) and `ClusterClient` (a process that
connected to it) are an `Endpoint`: they start workers, and the workers' messages and exits
come back to them. Delivery rules, in order, for a message from worker W:

1. a channel for W has been opened (`endpoint.channel(W)`): it is queued there;
2. else, if `on_message` callbacks are registered: each is called with (W, obj);
3. else it is queued until someone opens W's channel.

Callbacks (`on_message`, `on_worker_exit`) run on the endpoint's delivery thread (the
cluster's event loop, or the client's reader thread): they must return quickly and must not
wait for another message or exit. An exception in a callback is printed and ignored.
"""

from __future__ import annotations

import abc
import dataclasses
import queue
import signal as _signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import ChannelClosed, RemoteError
from .._wire import message_type, pack_message, unpack_message

_CLOSED = object()


@dataclasses.dataclass(frozen=True)
class WorkerExit:
    """How a worker ended. Exactly one of `code` / `signal` is set, except for a worker lost
    with its node (signal SIGKILL). `reason`: "exited" (its node reported the exit),
    "node_lost" (the node went down first), "shutdown" (the cluster closed)."""

    worker_id: str
    node_id: str
    name: str
    pid: int | None
    code: int | None
    signal: int | None
    result: Any = None
    error: BaseException | None = None
    traceback: str = ""
    reason: str = "exited"

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.error is None


@dataclasses.dataclass(frozen=True)
class Bundle:
    """One bundle of a placement; pass it as `start_worker(..., bundle=placement[i])`."""

    placement_id: str
    index: int
    node_id: str
    resources: Mapping[str, float]
    gpu_ids: list[int]
    tpu_ids: list[int]


class Placement:
    """Resources held on the cluster until `release()` (or the end of a `with` block)."""

    def __init__(self, endpoint: Endpoint, info: dict):
        self._endpoint = endpoint
        self.id: str = info["id"]
        self.strategy: str = info["strategy"]
        self.bundles: list[dict[str, float]] = info["bundles"]
        self.node_ids: list[str] = info["node_ids"]
        self.gpu_ids: list[list[int]] = info["gpu_ids"]
        self.tpu_ids: list[list[int]] = info["tpu_ids"]
        self._released = False

    def __len__(self) -> int:
        return len(self.bundles)

    def __getitem__(self, index: int) -> Bundle:
        return Bundle(self.id, index, self.node_ids[index], dict(self.bundles[index]),
                      list(self.gpu_ids[index]), list(self.tpu_ids[index]))

    def release(self) -> None:
        """Give the resources back (idempotent)."""
        if not self._released:
            self._released = True
            self._endpoint._release_placement(self.id)

    @property
    def released(self) -> bool:
        return self._released

    def __enter__(self) -> Placement:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Placement({self.id!r}, strategy={self.strategy!r}, node_ids={self.node_ids!r})"


class _Slot:
    """What an endpoint knows about one of its workers."""

    __slots__ = ("queue", "exit", "done", "opened")

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.exit: WorkerExit | None = None
        self.done = threading.Event()
        self.opened = False


class Channel:
    """The driver's end of one worker's channel: `send(obj)`, `recv(timeout=None)`."""

    def __init__(self, endpoint: Endpoint, worker_id: str, slot: _Slot):
        self.worker_id = worker_id
        self._endpoint = endpoint
        self._slot = slot

    def send(self, obj: object) -> None:
        self._endpoint.send(self.worker_id, obj)

    def recv(self, timeout: float | None = None) -> object:
        """The next message from the worker; TimeoutError after `timeout` seconds,
        ChannelClosed once the worker has exited and every message was received."""
        try:
            item = self._slot.queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no message from worker {self.worker_id} within {timeout} s") \
                from None
        if item is _CLOSED:
            self._slot.queue.put(_CLOSED)  # stay closed for every later caller
            raise ChannelClosed(f"worker {self.worker_id} has exited: {self._slot.exit}")
        return unpack_message(item)


class WorkerHandle:
    """A worker process started by `start_worker`."""

    def __init__(self, endpoint: Endpoint, worker_id: str, pid: int, node_id: str, name: str):
        self._endpoint = endpoint
        self.id = worker_id
        self.pid = pid
        self.node_id = node_id
        self.name = name
        self._slot = endpoint._slot(worker_id)

    def kill(self, signal: int = _signal.SIGKILL) -> None:
        """Send `signal` to the worker process (its exit is reported as usual)."""
        self._endpoint._kill_worker(self.id, int(signal))

    def wait(self, timeout: float | None = None) -> WorkerExit:
        """Block until the worker has exited; TimeoutError after `timeout` seconds."""
        if not self._slot.done.wait(timeout):
            raise TimeoutError(f"worker {self.id} ({self.name}) still runs after {timeout} s")
        return self._slot.exit  # type: ignore[return-value]

    @property
    def exit(self) -> WorkerExit | None:
        """The exit, or None while the worker runs."""
        return self._slot.exit

    def channel(self) -> Channel:
        return self._endpoint.channel(self.id)

    def __repr__(self) -> str:
        return f"WorkerHandle({self.id!r}, name={self.name!r}, node_id={self.node_id!r}, pid={self.pid})"


class Endpoint(abc.ABC):
    """Message and exit delivery for the workers this process started."""

    def __init__(self) -> None:
        self._slots_lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}
        self._exit_callbacks: list[Callable[[WorkerExit], Any]] = []
        self._message_callbacks: list[Callable[[str, Any], Any]] = []

    # -- lifecycle: `with Cluster(...) as c:` / `with connect(...) as c:` ------------------
    @abc.abstractmethod
    def close(self) -> None:
        """Let go of the cluster (idempotent): `Cluster` stops it, a client disconnects."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def on_worker_exit(self, callback: Callable[[WorkerExit], Any]) -> Callable:
        """Call `callback(WorkerExit)` the moment any worker of this endpoint exits."""
        self._exit_callbacks.append(callback)
        return callback

    def on_message(self, callback: Callable[[str, Any], Any]) -> Callable:
        """Call `callback(worker_id, obj)` for messages of workers without an open channel."""
        self._message_callbacks.append(callback)
        return callback

    def channel(self, worker_id: str) -> Channel:
        slot = self._slot(worker_id)
        slot.opened = True
        return Channel(self, worker_id, slot)

    def send(self, worker_id: str, obj: object) -> None:
        """Send `obj` (anything cloudpickle can pickle) to a worker."""
        self._send_payload(worker_id, pack_message(obj))

    def send_many(self, worker_ids: Sequence[str], obj: object) -> None:
        """Send the same `obj` to each of `worker_ids`, pickled once and in one request to
        the cluster; a worker that has exited is skipped (its exit says so)."""
        self._send_payloads(list(worker_ids), pack_message(obj))

    # -- implemented by Cluster / ClusterClient -------------------------------------------
    @abc.abstractmethod
    def _send_payload(self, worker_id: str, payload: bytes) -> None:
        """Send a packed message to a worker."""

    @abc.abstractmethod
    def _send_payloads(self, worker_ids: list[str], payload: bytes) -> None:
        """Send one packed message to several workers, skipping those that are gone."""

    @abc.abstractmethod
    def _kill_worker(self, worker_id: str, sig: int) -> None:
        """Signal a worker process."""

    @abc.abstractmethod
    def _release_placement(self, placement_id: str) -> None:
        """Give a placement's resources back."""

    # -- delivery --------------------------------------------------------------------------
    def _slot(self, worker_id: str) -> _Slot:
        with self._slots_lock:
            slot = self._slots.get(worker_id)
            if slot is None:
                slot = self._slots[worker_id] = _Slot()
            return slot

    def _on_message(self, worker_id: str, payload: bytes) -> None:
        slot = self._slot(worker_id)
        if slot.opened or not self._message_callbacks:
            slot.queue.put(payload)
            return
        try:
            obj = unpack_message(payload)
        except Exception:
            _report(f"could not unpickle a message from {worker_id}")
            return
        for callback in list(self._message_callbacks):
            try:
                callback(worker_id, obj)
            except Exception:
                _report(f"on_message callback {callback!r} raised")

    def _on_exit(self, worker_id: str, info: dict, payload: bytes | None) -> None:
        exit = _build_exit(info, payload)
        slot = self._slot(worker_id)
        slot.exit = exit
        slot.queue.put(_CLOSED)
        slot.done.set()
        for callback in list(self._exit_callbacks):
            try:
                callback(exit)
            except Exception:
                _report(f"on_worker_exit callback {callback!r} raised")


def _build_exit(info: dict, payload: bytes | None) -> WorkerExit:
    result = error = None
    tb = ""
    if payload is not None:
        try:
            outcome = unpack_message(payload)
        except Exception as exc:
            error = RemoteError(f"could not unpickle the outcome of worker {info['worker_id']} "
                                f"({message_type(payload)}): {exc!r}")
        else:
            if outcome[0] == "ok":
                result = outcome[1]
            elif outcome[0] == "error":
                error, tb = outcome[1], outcome[2]
    return WorkerExit(**info, result=result, error=error, traceback=tb)


def _report(what: str) -> None:
    print(f"simcluster: {what}:", file=sys.stderr)
    traceback.print_exc()
