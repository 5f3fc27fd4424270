"""Progress of long work (a conformance run, a fault matrix): items done / total, the item
running now, and the time elapsed.

Two faces behind one small API:

- live: a `rich` progress bar redrawn in place, used when the stream is a terminal and
  rich (the `cli` extra) is importable;
- plain: one line per finished item, for logs and CI, e.g.
  ``[12/189] 00:41 tune.asha_stops_trials ... passed``.

    with Progress(total=len(items), title="conformance: reference") as progress:
        for item in items:
            progress.start(item.name)
            progress.done(item.name, run(item))

Design note: the object only formats and writes; it never reads a clock of its own beyond
the start time, and it tolerates `done()` without a matching `start()` (pytest reports an
item's outcome even when its setup failed before it "started" for us) and more items than
`total` (the total then grows, so the line never reads ``[190/189]``).
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

__all__ = ["Progress", "format_elapsed"]


def format_elapsed(seconds: float) -> str:
    """``MM:SS`` below an hour, ``H:MM:SS`` from then on."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _rich_available() -> bool:
    try:
        import rich.progress  # noqa: F401
    except ImportError:
        return False
    return True


def _is_tty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Progress:
    """Shows how far a run of `total` items has come.

    `stream` is where it writes (stderr by default, so it stays out of reports written to
    stdout). `live=None` picks the live rich display when `stream` is a terminal and rich is
    importable, plain lines otherwise; `live=True` asks for rich (falling back to plain lines
    when rich is missing), `live=False` always writes plain lines. `clock` exists for tests.
    """

    def __init__(self, total: int, title: str, *, stream: TextIO | None = None,
                 live: bool | None = None, clock: Callable[[], float] = time.monotonic):
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            raise ValueError(f"total={total!r}: expected a whole number >= 0")
        self.total = total
        self.title = title
        self.stream = sys.stderr if stream is None else stream
        if live is None:
            live = _is_tty(self.stream)
        self.live = bool(live) and _rich_available()
        self._clock = clock
        self._started_at = clock()
        self.completed = 0
        self.current: str | None = None
        self.outcomes: dict[str, int] = {}
        self._closed = False
        self._rich = None
        self._task = None
        if self.live:
            self._open_rich()

    # -- rich ------------------------------------------------------------------------------
    def _open_rich(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress
        from rich.table import Column

        console = Console(file=self.stream)
        # the fixed columns keep their width; only the running item's name is cut short
        fixed = {"no_wrap": True}
        self._rich = RichProgress(
            TextColumn("[bold]{task.description}", table_column=Column(**fixed)),
            BarColumn(bar_width=20, table_column=Column(**fixed)),
            MofNCompleteColumn(table_column=Column(**fixed)),
            TimeElapsedColumn(table_column=Column(**fixed)),
            TextColumn("{task.fields[current]}", markup=False,
                       table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            console=console, transient=False, expand=True,
            # pytest swaps sys.stdout / sys.stderr around each test: leave them alone
            redirect_stdout=False, redirect_stderr=False,
        )
        self._rich.start()
        self._task = self._rich.add_task(self.title, total=self.total, current="")

    # -- API -------------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """Seconds since the progress was created."""
        return self._clock() - self._started_at

    def set_total(self, total: int) -> None:
        """Changes the number of items (when it is only known after starting)."""
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            raise ValueError(f"total={total!r}: expected a whole number >= 0")
        self.total = total
        if self._rich is not None:
            self._rich.update(self._task, total=total)

    def start(self, name: str) -> None:
        """Marks `name` as the item running now (shown by the live display)."""
        self.current = name
        if self._rich is not None:
            self._rich.update(self._task, current=name)

    def done(self, name: str, outcome: str) -> None:
        """Counts `name` as finished with `outcome` ("passed", "failed", ...); plain mode
        writes its line now."""
        self.completed += 1
        self.total = max(self.total, self.completed)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if self.current == name:
            self.current = None
        if self._rich is not None:
            self._rich.update(self._task, completed=self.completed, total=self.total,
                              current=f"{name} ... {outcome}")
            return
        self._write(f"[{self.completed}/{self.total}] {format_elapsed(self.elapsed)} "
                    f"{name} ... {outcome}")

    def summary(self) -> str:
        """One line: done / total, elapsed, and the count of each outcome."""
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items()))
        return (f"{self.title}: {self.completed}/{self.total} done in "
                f"{format_elapsed(self.elapsed)}" + (f" ({counts})" if counts else ""))

    def close(self) -> None:
        """Stops the live display and writes the summary line; closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
        self._write(self.summary())

    def _write(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (ValueError, OSError):  # the stream went away (closed pipe): progress is optional
            pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
