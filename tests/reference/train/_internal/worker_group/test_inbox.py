"""The inbox between a group's delivering thread and the controller's: an event is handled
where it arrives only while the controller waits and nothing is queued before it; the
controller's thread never runs beside a handler; a handler's error is raised there."""

from __future__ import annotations

import threading
import time

from reference.train._internal.worker_group.inbox import Inbox

DEADLINE_S = 10.0


class Handler:
    def __init__(self, accept=lambda event: event.startswith("report"), gate=None):
        self.accept, self.gate = accept, gate
        self.handled: list[tuple[str, str]] = []  # (event, thread name)
        self.started = threading.Event()

    def accepts(self, event):
        return self.accept(event)

    def handle(self, event):
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(DEADLINE_S)
        if event == "report-bad":
            raise ValueError("the handler failed")
        self.handled.append((event, threading.current_thread().name))
        return None


def waiting_get(inbox, timeout=None):
    """get() on a thread of its own ("controller"); returns (thread, results)."""
    results: list = []

    def run():
        try:
            results.append(inbox.get(timeout))
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            results.append(exc)

    thread = threading.Thread(target=run, name="controller", daemon=True)
    thread.start()
    deadline = time.monotonic() + DEADLINE_S
    while not inbox.waiting:
        assert time.monotonic() < deadline, "get() never waited"
        time.sleep(0.001)
    return thread, results


def test_an_event_is_handled_by_the_putting_thread_only_while_the_controller_waits():
    inbox, handler = Inbox(), Handler()
    inbox.offer(handler)
    inbox.put("report-0")  # nobody waits: queued for the controller
    assert inbox.get(0) == "report-0" and handler.handled == []
    thread, results = waiting_get(inbox)
    inbox.put("report-1")
    assert handler.handled == [("report-1", threading.current_thread().name)]
    inbox.put("failed")  # not accepted: queued, and wakes the controller
    thread.join(DEADLINE_S)
    assert results == ["failed"] and inbox.handled == 1


def test_nothing_overtakes_an_event_queued_before_it():
    inbox, handler = Inbox(), Handler()
    inbox.offer(handler)
    thread, results = waiting_get(inbox)
    inbox.put("failed")  # the controller's next event: whether or not it took it yet,
    inbox.put("report-1")  # this one must wait behind it (queued, not handled here)
    thread.join(DEADLINE_S)
    assert results == ["failed"] and handler.handled == []
    assert inbox.get(0) == "report-1"


def test_a_get_whose_timeout_ends_during_a_handler_waits_for_it():
    gate = threading.Event()
    inbox, handler = Inbox(), Handler(gate=gate)
    inbox.offer(handler)
    thread, results = waiting_get(inbox, timeout=0.01)
    putter = threading.Thread(target=inbox.put, args=("report-1",), name="loop", daemon=True)
    putter.start()
    assert handler.started.wait(DEADLINE_S)
    thread.join(0.1)  # well past its timeout: still waiting for the handler
    assert thread.is_alive() and results == []
    gate.set()
    putter.join(DEADLINE_S)
    thread.join(DEADLINE_S)
    assert results == [None] and handler.handled == [("report-1", "loop")]


def test_a_handlers_error_is_raised_by_the_controllers_next_get():
    inbox = Inbox()
    inbox.offer(Handler())
    thread, results = waiting_get(inbox)
    inbox.put("report-bad")  # does not raise here, on the delivering thread
    thread.join(DEADLINE_S)
    assert len(results) == 1 and isinstance(results[0], ValueError)
    assert str(results[0]) == "the handler failed"


def test_a_handler_can_shorten_the_controllers_wait():
    class Wake(Handler):
        def handle(self, event):
            super().handle(event)
            return 0.01  # "wake me in 10 ms": the controller had no timeout at all

    inbox = Inbox()
    inbox.offer(Wake())
    thread, results = waiting_get(inbox, timeout=None)
    inbox.put("report-1")
    thread.join(DEADLINE_S)
    assert not thread.is_alive() and results == [None]
