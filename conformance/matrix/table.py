"""Verdicts, cell results and the printed table of the fault-injection matrix.

Nothing here runs a fit: `verdict_of` turns what a cell raised into one of four verdicts,
`render` draws one fault x job table per implementation, `exit_code` decides CI's answer.
A cell is `pass`, `fail`, `hang` (its fit outlived the adapter's deadline) or `unsupported`
(the implementation or adapter lacks what the cell needs); only fail and hang fail the run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from conformance.adapters.base import Unsupported
from conformance.assertions import HangVerdict

VERDICTS = ("pass", "fail", "hang", "unsupported")
FAILING = frozenset({"fail", "hang"})
REASON_LIMIT = 200


@dataclasses.dataclass(frozen=True)
class CellResult:
    """What one cell (implementation x fault kind x job) came to."""

    impl: str
    fault: str
    job: str
    verdict: str
    seconds: float
    #: one line saying why, for every verdict but pass
    reason: str = ""
    #: the whole message (assertion text, traceback, stacks of a hang); JSON only
    detail: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"CellResult(verdict={self.verdict!r}): expected one of {VERDICTS}")
        if self.seconds < 0:
            raise ValueError(f"CellResult(seconds={self.seconds!r}): expected a number >= 0")

    @property
    def failing(self) -> bool:
        return self.verdict in FAILING


def one_line(text: str, setting: str = "", limit: int = REASON_LIMIT) -> str:
    """The first non-empty line of text, without the ` [setting]` suffix the conformance
    assertion helpers append, whitespace collapsed, cut to `limit` characters."""
    if setting:
        text = text.replace(f" [{setting}]", "")
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"\s+", " ", line).strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _gist(exc: BaseException) -> str:
    """`Type: first line ... last line` of an exception's message: a worker group error's
    first line only announces the per-rank snippets, its last names the rank's error."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    gist = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return f"{type(exc).__name__}: {gist}"


def verdict_of(exc: BaseException | None, setting: str = "",
               fit_error: BaseException | None = None) -> tuple[str, str, str]:
    """(verdict, one-line reason, detail) for what a cell raised (None: it passed).

    `fit_error` is the exception of the cell's last fit, if it raised: an assertion that the
    fit should have succeeded then names that exception and its message instead of the
    assertion's first line (which only says "fit() raised X").
    """
    if exc is None:
        return "pass", "", ""
    detail = str(exc)
    if isinstance(exc, Unsupported):
        return "unsupported", one_line(detail, setting), detail
    if isinstance(exc, HangVerdict):
        return "hang", one_line(detail, setting), detail
    if isinstance(exc, AssertionError):
        if fit_error is not None and detail.startswith("fit() raised"):
            return "fail", one_line(f"fit() raised {_gist(fit_error)}"), detail
        return "fail", one_line(detail, setting), detail
    # anything else is the matrix's or the adapter's own error while driving the cell
    return "fail", one_line(f"{type(exc).__name__}: {exc}", setting), detail


def exit_code(results: Sequence[CellResult]) -> int:
    """1 when any cell failed or hung, else 0 (unsupported cells do not fail the run)."""
    return 1 if any(r.failing for r in results) else 0


def _ordered(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = ["-" * w for w in widths]
    lines = []
    for row in [rows[0], rule, *rows[1:]]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return lines


def render(results: Sequence[CellResult], versions: dict | None = None) -> str:
    """One fault x job table per implementation (verdict and seconds in each cell), then
    the reason of every cell that did not pass, then a one-line summary."""
    versions = versions or {}
    out: list[str] = []
    for impl in _ordered([r.impl for r in results]):
        mine = [r for r in results if r.impl == impl]
        jobs = _ordered([r.job for r in mine])
        by_key = {(r.fault, r.job): r for r in mine}
        rows = [["fault", *jobs]]
        for fault in _ordered([r.fault for r in mine]):
            cells = []
            for job in jobs:
                r = by_key.get((fault, job))
                cells.append("" if r is None else f"{r.verdict} {r.seconds:.1f}s")
            rows.append([fault, *cells])
        version = f" {versions[impl]}" if impl in versions else ""
        out.append(f"== {impl}{version}")
        out.extend(_grid(rows))
        out.append("")
    others = [r for r in results if r.verdict != "pass"]
    if others:
        out.append("not passed:")
        out.extend(f"  {r.impl} {r.fault} x {r.job}: {r.verdict}: {r.reason}" for r in others)
        out.append("")
    out.append(summary(results))
    return "\n".join(out) + "\n"


def summary(results: Sequence[CellResult]) -> str:
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    total = sum(r.seconds for r in results)
    parts = ", ".join(f"{counts[v]} {v}" for v in VERDICTS)
    return f"{len(results)} cells: {parts} ({total:.1f} s in cells)"


def to_json(results: Sequence[CellResult], **meta) -> dict:
    return {**meta, "cells": [dataclasses.asdict(r) for r in results],
            "exit_code": exit_code(results)}
