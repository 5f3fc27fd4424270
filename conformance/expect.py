"""Assertion helpers: each says what was expected, what was seen and the setting."""

from __future__ import annotations

import traceback
from typing import Any

from conformance.adapters.base import Outcome


class HangVerdict(AssertionError):
    """A fit() did not finish before its deadline: a verdict of its own, not a stuck run."""


def _fmt_error(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]


def succeeded(outcome: Outcome, setting: str = ""):
    """The Result of a fit that must succeed."""
    __tracebackhide__ = True
    if outcome.hang:
        raise HangVerdict(
            f"fit() did not finish within its deadline ({outcome.elapsed_s:.0f}s) "
            f"[{setting}]\n{outcome.stacks[-6000:]}"
        )
    if outcome.error is not None:
        raise AssertionError(
            f"fit() raised {type(outcome.error).__name__}, expected success [{setting}]\n"
            + _fmt_error(outcome.error)
        )
    return outcome.result


def failed(outcome: Outcome, exc_type: type | tuple, setting: str = "") -> BaseException:
    """The exception of a fit that must raise exc_type."""
    __tracebackhide__ = True
    if outcome.hang:
        raise HangVerdict(
            f"fit() did not finish within its deadline ({outcome.elapsed_s:.0f}s), expected it "
            f"to raise {exc_type} [{setting}]\n{outcome.stacks[-6000:]}"
        )
    if outcome.error is None:
        raise AssertionError(f"fit() succeeded, expected it to raise {exc_type} [{setting}]")
    if not isinstance(outcome.error, exc_type):
        raise AssertionError(
            f"fit() raised {type(outcome.error).__name__}, expected {exc_type} [{setting}]\n"
            + _fmt_error(outcome.error)
        )
    return outcome.error


def equal(seen: Any, expected: Any, what: str, setting: str = "") -> None:
    __tracebackhide__ = True
    if seen != expected:
        raise AssertionError(f"{what}={seen!r}, expected {expected!r} [{setting}]")


def verdict(v, setting: str = "") -> None:
    """Fail unless a history checker's verdict is valid."""
    __tracebackhide__ = True
    if not v.valid:
        raise AssertionError(f"history check {v.name}: {v.status}: {v.reason} [{setting}]")
