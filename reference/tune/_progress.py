"""What a person sees while an experiment runs.

On a terminal: a table of the trials (name, status, the searched config values, iteration,
the metric), redrawn in place at most twice a second. Elsewhere (CI logs, files): one plain
line per event. `verbose` (tune.RunConfig): 0 prints nothing, 1 the trial events and the
final table, 2 (default) also each result's metric, 3 every result in full.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Optional

from reference.tune.stopper import flatten

_AUTO = {"timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date",
         "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "config",
         "time_since_restore", "iterations_since_restore", "should_checkpoint"}


class ProgressReporter:
    def __init__(self, *, metric: Optional[str], mode: Optional[str], searched: list[str],
                 verbose: int = 2, stream=None, experiment_name: str = ""):
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.metric, self.mode = metric, mode
        self.searched = searched
        self.verbose = verbose
        self.experiment_name = experiment_name
        self._drawn_lines = 0
        self._drawn_at = 0.0
        self._start = time.monotonic()

    # -- events (plain lines when not on a terminal) -----------------------------------------
    def on_status(self, trial) -> None:
        if self.verbose < 1 or self.tty:
            return
        status = trial.status
        if status == "RUNNING":
            config = {k: v for k, v in flatten(trial.config).items() if k in self.searched}
            self._line(f"Trial {trial} started" + (f" with config {config}" if config else ""))
        elif status == "TERMINATED":
            self._line(f"Trial {trial} completed after {trial.iteration} iterations"
                       + self._metric_text(trial.last_result))
        elif status == "ERROR":
            self._line(f"Trial {trial} errored after {trial.iteration} iterations: "
                       f"{(trial.error_text or '').strip().splitlines()[-1:]}")
        elif status == "PAUSED":
            self._line(f"Trial {trial} paused at iteration {trial.iteration}")
        elif status == "PENDING" and trial.num_failures:
            self._line(f"Trial {trial} failed ({trial.num_failures} so far); restarting"
                       + (" from its latest checkpoint" if trial.restore_from else ""))

    def on_result(self, trial, result: dict) -> None:
        if self.tty or self.verbose < 2:
            return
        if self.verbose >= 3:
            shown = {k: v for k, v in flatten(result).items() if k not in _AUTO}
            self._line(f"Trial {trial} iteration {result['training_iteration']}: {shown}")
        else:
            self._line(f"Trial {trial} iteration {result['training_iteration']}"
                       + self._metric_text(result))

    def _metric_text(self, result: dict) -> str:
        if not result:
            return ""
        flat = flatten(result)
        if self.metric and self.metric in flat:
            return f", {self.metric}={_fmt(flat[self.metric])}"
        shown = [f"{k}={_fmt(v)}" for k, v in flat.items() if k not in _AUTO][:3]
        return (", " + ", ".join(shown)) if shown else ""

    def _line(self, text: str) -> None:
        self.stream.write(f"[tune] {text}\n")
        self.stream.flush()

    # -- the table --------------------------------------------------------------------------
    def refresh(self, trials: list, force: bool = False) -> None:
        if not self.tty or self.verbose < 1:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < 0.5:
            return
        self._drawn_at = now
        lines = self.table(trials)
        if self._drawn_lines:
            self.stream.write(f"\x1b[{self._drawn_lines}F\x1b[J")
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn_lines = len(lines)

    def table(self, trials: list) -> list[str]:
        counts = Counter(t.status for t in trials)
        elapsed = time.monotonic() - self._start
        head = ("Trial status: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                + f" | {self.experiment_name} | {elapsed:.0f} s")
        columns = ["Trial name", "status", *self.searched, "iter", self.metric or ""]
        rows = []
        for t in trials:
            flat_config = flatten(t.config)
            flat_result = flatten(t.last_result) if t.last_result else {}
            rows.append([str(t), t.status, *(_fmt(flat_config.get(k)) for k in self.searched),
                         str(t.iteration),
                         _fmt(flat_result.get(self.metric)) if self.metric else ""])
        if not self.metric:
            columns, rows = columns[:-1], [r[:-1] for r in rows]
        widths = [max(len(str(c)), *(len(r[i]) for r in rows)) if rows else len(str(c))
                  for i, c in enumerate(columns)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        return [head, fmt.format(*columns), *(fmt.format(*r) for r in rows)]

    def final(self, trials: list) -> None:
        if self.verbose < 1:
            return
        if self.tty:
            self.refresh(trials, force=True)
            return
        for line in self.table(trials):
            self._line(line)


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.5g}"
    return str(value)
