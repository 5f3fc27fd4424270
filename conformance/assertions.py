"""Assertion helpers: each says what was expected, what was seen and the setting."""

from __future__ import annotations

import dataclasses
import traceback
from collections import defaultdict
from typing import Any

from hypothesis import currently_in_test_context, event

from conformance.adapters.base import Outcome


@dataclasses.dataclass(frozen=True)
class UnreportedRound:
    """A report round of a hung fit that some ranks entered and others never reached."""

    attempt: int
    round: int  # report index within the attempt
    step: Any
    missing: tuple  # world ranks with no report event for the round
    waiting: tuple  # ranks inside report() for it (entered, never returned)

    def __str__(self) -> str:
        return (f"ranks {list(self.missing)} had not reported round {self.round} (step "
                f"{self.step}) of attempt {self.attempt}, while ranks {list(self.waiting)} "
                "waited in report()")


def unreported_rounds(events: list[dict]) -> list[UnreportedRound]:
    """The rounds of the journal's latest attempt that some ranks are waiting in while
    other ranks of the attempt never entered them (the probe's `report` event is written
    just before report(), `reported` just after)."""
    starts = [e for e in events if e.get("ev") == "start"]
    if not starts:
        return []
    attempt = max(e["attempt"] for e in starts)
    world = max(e["world_size"] for e in starts if e["attempt"] == attempt)
    entered: dict[int, list] = defaultdict(list)  # rank -> steps of its reports, in order
    returned = set()
    for e in events:
        if e.get("attempt") != attempt:
            continue
        if e["ev"] == "report":
            entered[e["rank"]].append(e["step"])
        elif e["ev"] == "reported":
            returned.add((e["rank"], e["step"]))
    rounds = []
    for index in range(max((len(v) for v in entered.values()), default=0)):
        ranks = sorted(r for r, steps in entered.items() if len(steps) > index)
        missing = tuple(sorted(set(range(world)) - set(ranks)))
        waiting = tuple(r for r in ranks if (r, entered[r][index]) not in returned)
        if missing and waiting:
            rounds.append(UnreportedRound(attempt, index, entered[ranks[0]][index], missing,
                                          waiting))
    return rounds


class HangVerdict(AssertionError):
    """A fit() did not finish before its deadline: a verdict of its own, not a stuck run.

    `unreported` lists the report rounds the probe's journal shows some ranks waiting in
    while others never called report() for them (the usual cause of a hang)."""

    def __init__(self, message: str, unreported: tuple = ()):
        super().__init__(message)
        self.unreported = tuple(unreported)

    @classmethod
    def of(cls, outcome: Outcome, expected: str, setting: str) -> HangVerdict:
        unreported = ()
        if outcome.journal_dir is not None:
            from conformance.probe import Journal

            try:
                unreported = tuple(unreported_rounds(Journal(outcome.journal_dir).events()))
            except Exception:  # noqa: BLE001 - an unreadable journal only loses the diagnosis
                unreported = ()
        # The first line is what reports keep: it names the ranks that never reported.
        why = "".join(f"; {u}" for u in unreported)
        return cls(f"fit() did not finish within its deadline ({outcome.elapsed_s:.0f}s)"
                   f"{expected}{why} [{setting}]\n{outcome.stacks[-12000:]}", unreported)


def _fmt_error(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]


def succeeded(outcome: Outcome, setting: str = ""):
    """The Result of a fit that must succeed."""
    __tracebackhide__ = True
    if outcome.hang:
        raise HangVerdict.of(outcome, "", setting)
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
        raise HangVerdict.of(outcome, f", expected it to raise {exc_type}", setting)
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
