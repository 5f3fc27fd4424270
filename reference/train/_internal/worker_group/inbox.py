"""A worker group's events on their way to the controller, with a way past the queue.

Events arrive on the cluster's delivery thread and wait here until the controller's thread
takes them (`get`, behind `WorkerGroup.next_event`). Handing each one over costs a thread
switch, and a metrics-only report pays two (to the controller, and back to the delivery
thread's socket with the acknowledgement) for work of a few microseconds. So the controller
may `offer` a handler (controller/inline_reports.py) for the events it can handle on the
thread that delivers them; `put` then runs it right there instead of queueing.

Rules, and the hazards they keep away:
- An event is handled where it arrives only while the controller's thread waits in `get`
  (its state is at rest), nothing is queued before it (no event overtakes an earlier one:
  a rank's failure queued first is seen first), no other handler runs, and the handler
  accepts it. Acceptance is decided under the lock, so two delivering threads cannot both
  pass; the handler then runs outside it, alone: a `get` whose timeout ends meanwhile waits
  for it before returning, and no handler starts again until the controller waits again.
- An exception of the handler is raised by the controller's next `get`, on its own thread,
  as if its own handling of the event had raised.
- The handler returns how soon the controller wants to wake (seconds, or None); a waiting
  `get` shortens its timeout to that (a round the handler opened is warned about on time,
  though the controller computed its timeout before the round existed).
"""

from __future__ import annotations

import collections
import threading
import time


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


class Inbox:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._items: collections.deque = collections.deque()
        self._handler = None
        self._waiting = False  # the controller's thread is blocked in get()
        self._busy = False  # a handler runs on a delivering thread
        self._idle_wanted = False  # get() waits for that handler to finish
        self._deadline: float | None = None  # monotonic time the waiting get() returns at
        #: events a handler took (what tests read to see which thread handled a report)
        self.handled = 0

    @property
    def waiting(self) -> bool:
        """The controller's thread waits in `get` (an event put now may be handled inline)."""
        return self._waiting

    def offer(self, handler) -> None:
        """`handler.accepts(event) -> bool` (quick: it runs under this inbox's lock) and
        `handler.handle(event) -> float | None` (the controller's wanted timeout); None
        withdraws it."""
        self._handler = handler

    def put(self, event) -> None:
        handler = self._handler
        with self._cond:
            if not (self._waiting and not self._busy and not self._items
                    and handler is not None and handler.accepts(event)):
                self._items.append(event)
                self._cond.notify()
                return
            self._busy = True
        wake = failed = None
        try:
            wake = handler.handle(event)
        except Exception as exc:  # noqa: BLE001 - raised on the controller's thread
            failed = _Raised(exc)
        finally:
            with self._cond:
                self._busy = False
                self.handled += 1
                # Wake the controller's thread only when it has something to do: the
                # steady state of metrics-only rounds wakes it not at all.
                notify = self._idle_wanted
                if failed is not None:
                    self._items.append(failed)
                    notify = True
                if wake is not None:
                    at = time.monotonic() + wake
                    if self._deadline is None or at < self._deadline:
                        self._deadline, notify = at, True
                if notify:
                    self._cond.notify()

    def get(self, timeout: float | None):
        """The next event, waiting at most `timeout` seconds (None: forever; 0: only what
        is queued already); None when there was none."""
        with self._cond:
            self._deadline = None if timeout is None else time.monotonic() + timeout
            self._waiting = timeout != 0
            try:
                while True:
                    if self._busy:
                        self._idle_wanted = True
                        self._cond.wait()
                        self._idle_wanted = False
                        continue
                    if self._items:
                        item = self._items.popleft()
                        if isinstance(item, _Raised):
                            raise item.error
                        return item
                    wait = None
                    if self._deadline is not None:
                        wait = self._deadline - time.monotonic()
                        if wait <= 0:
                            return None
                    self._cond.wait(wait)
            finally:
                self._waiting = False
                while self._busy:  # e.g. Ctrl-C in the wait: the handler still finishes alone
                    self._idle_wanted = True
                    self._cond.wait()
                self._idle_wanted = False


class InboxEvents:
    """`next_event` and `offer_inline` of a WorkerGroup whose events arrive in `self.events`,
    an Inbox."""

    events: Inbox

    def next_event(self, timeout: float | None):
        return self.events.get(timeout)

    def offer_inline(self, handler) -> None:
        self.events.offer(handler)
