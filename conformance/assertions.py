"""Assertion helpers: each says what was expected, what was seen and the setting."""

from __future__ import annotations

import traceback
from typing import Any

from hypothesis import currently_in_test_context, event

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


def _names(types) -> str:
    return " or ".join(sorted(t.__name__ for t in types))


def constructed(factory, kwargs: dict, expected: set, what: str):
    """factory(**kwargs) held to an oracle: `expected` holds the exception types the call may
    raise (any one of them will do, as the clauses do not order their rules); empty, it must
    succeed. Returns the object built, or None when the call raised as expected. `what`
    names the factory in the messages."""
    __tracebackhide__ = True
    if currently_in_test_context():
        event(f"expected: {_names(expected) if expected else 'success'}")
    setting = f"{what}(**{kwargs!r})"
    try:
        made = factory(**kwargs)
    except Exception as exc:  # noqa: BLE001 - compared with the oracle below
        if not expected:
            raise AssertionError(
                f"raised {type(exc).__name__}({exc}), expected success [{setting}]") from exc
        if not isinstance(exc, tuple(expected)):
            raise AssertionError(f"raised {type(exc).__name__}({exc}), expected "
                                 f"{_names(expected)} [{setting}]") from exc
        return None
    if expected:
        raise AssertionError(
            f"constructed {made!r}, expected it to raise {_names(expected)} [{setting}]")
    return made


def equal(seen: Any, expected: Any, what: str, setting: str = "") -> None:
    __tracebackhide__ = True
    if seen != expected:
        raise AssertionError(f"{what}={seen!r}, expected {expected!r} [{setting}]")


def verdict(v, setting: str = "") -> None:
    """Fail unless a journal checker's verdict (`conformance.journal_checks`) is valid."""
    __tracebackhide__ = True
    if not v.valid:
        raise AssertionError(f"journal check {v.name}: {v.status}: {v.reason} [{setting}]")
