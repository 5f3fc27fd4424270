"""A hang verdict names the ranks that never reported the round the others wait in."""

import json
import threading

import pytest

from conformance import assertions
from conformance.adapters.base import Outcome
from conformance.assertions import HangVerdict, UnreportedRound, unreported_rounds


def start(rank, attempt=0, world=3):
    return {"ev": "start", "rank": rank, "attempt": attempt, "world_size": world}


def report(rank, step, attempt=0):
    return {"ev": "report", "rank": rank, "step": step, "attempt": attempt, "checkpoint": True}


def reported(rank, step, attempt=0):
    return {"ev": "reported", "rank": rank, "step": step, "attempt": attempt}


def end(rank, attempt=0):
    return {"ev": "end", "rank": rank, "attempt": attempt}


def partial_round():
    """Attempt 1 of 3 ranks: everyone reported step 0; ranks 0 and 2 entered step 1's
    report, rank 1 returned instead (attempt 0 was a failure that does not matter)."""
    return [start(0), start(1), report(0, 0), report(1, 0),
            start(0, attempt=1), start(1, attempt=1), start(2, attempt=1),
            *[e for r in range(3) for e in (report(r, 0, 1), reported(r, 0, 1))],
            report(0, 1, 1), report(2, 1, 1), end(1, attempt=1)]


def write_journal(folder, events):
    (folder / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return str(folder)


def test_a_round_some_ranks_never_entered_names_them():
    assert unreported_rounds(partial_round()) == [
        UnreportedRound(attempt=1, round=1, step=1, missing=(1,), waiting=(0, 2))]


@pytest.mark.parametrize("events", [
    [],
    [start(0, world=2), start(1, world=2), report(0, 0), report(1, 0)],  # all entered
    [start(0, world=2), start(1, world=2), report(0, 0), reported(0, 0)],  # nobody waits
])
def test_no_partial_round_no_diagnosis(events):
    assert unreported_rounds(events) == []


def test_a_rank_that_never_started_is_missing_too():
    events = [start(0, world=2), report(0, 5)]
    assert unreported_rounds(events) == [UnreportedRound(0, 0, 5, (1,), (0,))]


def test_the_hang_verdict_text_names_the_missing_ranks(tmp_path):
    outcome = Outcome(hang=True, elapsed_s=60.0, stacks="<stacks>",
                      journal_dir=write_journal(tmp_path, partial_round()))
    with pytest.raises(HangVerdict) as info:
        assertions.succeeded(outcome, "DataParallelTrainer(num_workers=3)")
    first_line = str(info.value).splitlines()[0]
    assert first_line == (
        "fit() did not finish within its deadline (60s); ranks [1] had not reported round 1 "
        "(step 1) of attempt 1, while ranks [0, 2] waited in report() "
        "[DataParallelTrainer(num_workers=3)]")
    assert info.value.unreported == (UnreportedRound(1, 1, 1, (1,), (0, 2)),)
    with pytest.raises(HangVerdict, match=r"expected it to raise .*ranks \[1\] had not"):
        assertions.failed(outcome, RuntimeError, "x")


def test_without_a_journal_the_verdict_is_as_before():
    with pytest.raises(HangVerdict) as info:
        assertions.succeeded(Outcome(hang=True, elapsed_s=5.0), "s")
    assert str(info.value).splitlines()[0] == "fit() did not finish within its deadline (5s) [s]"
    assert info.value.unreported == ()


def test_the_reference_adapter_passes_the_journal_of_a_hung_fit(tmp_path, monkeypatch):
    from conformance.adapters import reference_adapter

    release = threading.Event()

    class Trainer:
        def fit(self):
            release.wait(10)

    class Factory:
        journal_dir = str(tmp_path)

        def __call__(self):
            return Trainer()

    adapter = reference_adapter.ReferenceAdapter()
    monkeypatch.setattr(adapter, "reset", lambda: None)
    try:
        outcome = adapter.fit(Factory(), deadline_s=0.1)
    finally:
        release.set()
    assert outcome.hang and outcome.journal_dir == str(tmp_path)
