"""Expectation files: `conformance/expectations/<impl>.txt`.

One entry per line: `<test-id prefix> | <reason>`; a line starting with `#` is a comment
(a `#` inside a reason is kept), and a line without a prefix or a reason is an error (an
empty prefix would match every check). A prefix is a test id relative to
`conformance/checks/` (e.g. `check_report.py::check_barrier`, or a whole file). Matching checks are marked expected-to-fail (non-strict); an entry that
matches no check, or whose checks all passed, is reported as stale.
"""

from __future__ import annotations

import dataclasses
import os

HERE = os.path.join(os.path.dirname(__file__), "expectations")


@dataclasses.dataclass
class Entry:
    prefix: str
    reason: str
    line: int
    matched: int = 0
    xfailed: int = 0
    xpassed: int = 0


def path_for(impl_name: str) -> str:
    return os.path.join(HERE, f"{impl_name}.txt")


def parse(text: str) -> list[Entry]:
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if raw.lstrip().startswith("#") else raw.strip()
        if not line:
            continue
        prefix, sep, reason = line.partition("|")
        if not sep or not prefix.strip() or not reason.strip():
            raise ValueError(f"expectations line {number}: {raw!r}: expected '<prefix> | <reason>'")
        entries.append(Entry(prefix.strip(), reason.strip(), number))
    return entries


def load(path: str) -> list[Entry]:
    """Entries of an expectation file (none when it does not exist)."""
    try:
        with open(path) as f:
            return parse(f.read())
    except FileNotFoundError:
        return []


def check_id(nodeid: str) -> str:
    """A node id relative to the checks folder, wherever pytest was started."""
    marker = "checks/"
    return nodeid.split(marker, 1)[1] if marker in nodeid else nodeid


def match(entries: list[Entry], nodeid: str) -> Entry | None:
    cid = check_id(nodeid)
    best = None
    for e in entries:
        if cid.startswith(e.prefix) and (best is None or len(e.prefix) > len(best.prefix)):
            best = e
    return best


def stale(entries: list[Entry]) -> list[str]:
    out = []
    for e in entries:
        if e.matched == 0:
            out.append(f"line {e.line}: {e.prefix!r} matches no check")
        elif e.xpassed and not e.xfailed:
            out.append(f"line {e.line}: {e.prefix!r}: every matching check that ran passed "
                       f"({e.xpassed})")
    return out
