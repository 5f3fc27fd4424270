"""The `simcluster run` progress display: a live `rich` panel on a terminal when rich is
installed, plain lines (one per notable event) otherwise.

Both listen to the history (`History.subscribe`), so they run on the thread that records an
event: they only count and print, never wait. Events of a layer above (dotted names, e.g.
the reference's train.attempt_start, train.failure) are notable too, each name at most once
a second (a run's train.report would otherwise be a line per round).
"""

from __future__ import annotations

import collections
import threading
import time

NOTABLE = ("node_up", "node_down", "node_paused", "node_resumed", "fault", "plan_skipped",
           "plan_done", "plan_unfired", "heal")
#: seconds between two shown events of the same dotted (user) name
USER_EVENT_INTERVAL_S = 1.0


def _describe(event: dict, t0: float) -> str:
    fields = " ".join(f"{k}={v}" for k, v in event.items()
                      if k not in ("t", "seq", "event", "plan", "resources", "labels", "trigger"))
    return f"+{event['t'] - t0:.3f}s {event['event']} {fields}".rstrip()


class _Counts:
    def __init__(self, history) -> None:
        self.history = history
        events = history.events("cluster_start")
        self.t0 = events[0]["t"] if events else time.monotonic()
        self.lock = threading.Lock()
        self.nodes: dict[str, str] = {}
        self.running = 0
        self.messages = 0
        self.faults = 0
        self.recent: collections.deque = collections.deque(maxlen=6)
        self.last_shown: dict[str, float] = {}
        self.closed = False
        history.subscribe(self.on_event)

    def on_event(self, event: dict) -> None:
        kind = event["event"]
        with self.lock:
            if self.closed:
                return
            if kind == "message":
                self.messages += 1
                return
            if kind == "node_up":
                self.nodes[event["node"]] = "up"
            elif kind in ("node_down", "node_paused", "node_resumed"):
                self.nodes[event["node"]] = {"node_down": "down", "node_paused": "paused",
                                             "node_resumed": "up"}[kind]
            elif kind == "worker_start":
                self.running += 1
            elif kind == "worker_exit":
                self.running -= 1
            elif kind == "fault":
                self.faults += 1
            if "." in kind:
                if event["t"] - self.last_shown.get(kind, float("-inf")) < USER_EVENT_INTERVAL_S:
                    return
                self.last_shown[kind] = event["t"]
            if kind in NOTABLE or "." in kind or (kind == "worker_exit"
                                                 and event.get("code") != 0):
                line = _describe(event, self.t0)
                self.recent.append(line)
                self.show(line)

    def show(self, line: str) -> None:
        """Plain mode prints each notable event; the rich panel redraws instead."""

    def close(self) -> None:
        with self.lock:
            self.closed = True
        self.history.unsubscribe(self.on_event)


class PlainProgress(_Counts):
    def __init__(self, history, stream) -> None:
        self.stream = stream
        super().__init__(history)

    def show(self, line: str) -> None:
        print(f"simcluster {line}", file=self.stream, flush=True)


class RichProgress(_Counts):
    def __init__(self, history, stream) -> None:
        from rich.console import Console
        from rich.live import Live

        super().__init__(history)
        self.live = Live(self, console=Console(file=stream), refresh_per_second=4,
                         transient=False)
        self.live.start()

    def __rich__(self):
        from rich.panel import Panel
        from rich.text import Text

        with self.lock:
            states = collections.Counter(self.nodes.values())
            head = (f"{time.monotonic() - self.t0:7.1f}s  nodes up {states['up']}"
                    f" paused {states['paused']} down {states['down']}  workers "
                    f"{self.running}  messages {self.messages}  faults {self.faults}")
            body = "\n".join([head, *self.recent])
        return Panel(Text(body), title="simcluster", expand=False)

    def close(self) -> None:
        super().close()
        self.live.stop()


class _Quiet:
    def close(self) -> None:
        pass


def make_progress(history, *, quiet: bool, stream):
    if quiet:
        return _Quiet()
    if stream.isatty():
        try:
            import rich  # noqa: F401
        except ImportError:
            pass
        else:
            return RichProgress(history, stream)
    return PlainProgress(history, stream)
