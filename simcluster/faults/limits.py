"""The bounds of a fault plan: how long a step may wait, how deep and how big a file may be.

A plan is read from files people pass around, so what it may contain is bounded before it
reaches a parser that recurses or a timer that overflows:

- `MAX_SECONDS` (one week) for every duration (`after_s`, `seconds`, `grace_s`,
  `deadline_s`): a longer one overflowed the plan thread's timer (a plan that waits for a
  week tests nothing anyway); `plan.schema.json` says the same;
- `MAX_DEPTH` levels of nesting (the format itself needs 6), checked on the text before
  parsing (JSON and YAML parsers recurse once per level) and on data given as Python
  objects;
- `MAX_VALUES` values in all, counting each use of a YAML alias as the values it repeats
  (a few lines of anchors can stand for a billion).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

MAX_SECONDS = 7 * 24 * 3600.0
MAX_DEPTH = 32
MAX_VALUES = 100_000

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_FIX = "a fault plan nests at most {} levels (the format needs 6; see docs/fault_plans.md)"


def check_seconds(where: str, value: Any, *, optional: bool) -> None:
    """A duration: a number in [0, MAX_SECONDS], or None where `optional`."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{where}={value!r}: expected a number of seconds >= 0 and <= "
                         f"{MAX_SECONDS:g} (one week)" + (" or None" if optional else ""))


def _too_deep(source: str, depth: int, line: int | None) -> ValueError:
    at = f" at line {line}" if line is not None else ""
    return ValueError(f"{source}: nested more than {MAX_DEPTH} levels deep{at}; "
                      + _FIX.format(MAX_DEPTH))


def check_json_text(text: str, source: str) -> None:
    """ValueError if the JSON text nests deeper than MAX_DEPTH (before it is parsed)."""
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(source, depth, text.count("\n", 0, token.start()) + 1)
        elif char in "]}":
            depth -= 1


def check_yaml_text(text: str, source: str) -> None:
    """ValueError if the YAML text nests deeper than MAX_DEPTH, or its aliases stand for
    more than MAX_VALUES values (before it is composed: PyYAML's parser does not recurse,
    its composer does). Raises yaml.YAMLError for text that is not YAML."""
    import yaml

    sizes: dict[str, int] = {}          # anchor -> values it stands for
    open_: list[list] = []              # [anchor, values so far] per open collection
    total = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            n = sizes.get(event.anchor, 1)
        elif isinstance(event, yaml.ScalarEvent):
            n = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            open_.append([event.anchor, 1])
            if len(open_) > MAX_DEPTH:
                raise _too_deep(source, len(open_), event.start_mark.line + 1)
            total += 1
            continue
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, n = open_.pop()
            if anchor:
                sizes[anchor] = n
            if open_:
                open_[-1][1] += n
            continue
        else:
            continue
        total += n
        if open_:
            open_[-1][1] += n
        if total > MAX_VALUES:
            raise ValueError(f"{source}: more than {MAX_VALUES} values (counting each use of "
                             f"an alias as the values it repeats) at line "
                             f"{event.start_mark.line + 1}; a fault plan is smaller: write "
                             "the steps out, or split the plan")


def check_data(data: Any, source: str) -> None:
    """ValueError if plan data (as Python objects) nests deeper than MAX_DEPTH or holds more
    than MAX_VALUES values (a shared list counts at every place it appears)."""
    stack = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ValueError(f"{source}: more than {MAX_VALUES} values; a fault plan is "
                             "smaller: split it")
        if isinstance(value, Mapping):
            children = list(value.values())
        elif isinstance(value, (list, tuple)):
            children = list(value)
        else:
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(source, depth, None)
        stack.extend((child, depth + 1) for child in children)
