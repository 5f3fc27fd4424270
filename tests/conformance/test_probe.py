"""The probe's journal: readers tolerate a line still being written, and a failure of the
probe itself is the suite's error (a skipped check), never the implementation's failure."""

import json
import multiprocessing
import textwrap
import unittest

import pytest

from conformance import probe
from conformance.probe import Journal, ProbeError, Script

pytest_plugins = ["pytester"]


def _write(folder, data: bytes) -> Journal:
    journal = Journal(str(folder))
    with open(journal.path, "ab") as f:
        f.write(data)
    return journal


def test_a_final_line_without_newline_is_left_for_the_next_read(tmp_path):
    journal = _write(tmp_path, b'{"ev": "start", "rank": 0}\n{"ev": "report", "rank": 0}\n'
                               b'{"ev": "reported", "rank": 0, "peers_arr')
    assert [e["ev"] for e in journal.events()] == ["start", "report"]
    assert journal.events_so_far("report") == [{"ev": "report", "rank": 0}]


def test_a_torn_line_inside_the_journal_is_a_suite_error(tmp_path):
    journal = _write(tmp_path, b'{"ev": "start", "rank": 0}\n{"ev": "rep{"ev": "x"}\n')
    assert journal.events_so_far() == [{"ev": "start", "rank": 0}]  # ranks carry on
    with pytest.raises(ProbeError, match="line 2 is not an event") as info:
        journal.events()
    assert isinstance(info.value, unittest.SkipTest)
    assert "not a failure of the implementation" in str(info.value)


def test_a_failing_instrument_is_noted_and_the_function_goes_on(tmp_path):
    journal = Journal(str(tmp_path))

    @probe._instrument(default="fallback")
    def broken(journal):
        raise OSError("journal folder gone")

    assert broken(journal) == "fallback"
    (noted,) = journal.events_so_far(probe.PROBE_ERROR)
    assert noted["where"] == "broken" and "journal folder gone" in noted["error"]
    with pytest.raises(ProbeError, match="broken in pid .*journal folder gone"):
        journal.events()


def test_an_unwritable_journal_is_noted_beside_it(tmp_path, monkeypatch):
    journal = Journal(str(tmp_path))

    def no_space(self, event):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Journal, "_append", no_space)
    assert journal.record(ev="start") is False
    monkeypatch.undo()
    with pytest.raises(ProbeError, match="No space left on device"):
        journal.events()


def _append_many(folder: str, writer: int, count: int, go) -> None:
    journal = Journal(folder)
    go.wait(10)
    for i in range(count):
        journal.record(ev="bulk", writer=writer, i=i, pad="x" * (8192 + 4093 * i % 16384))


def _stress_round(folder: str, writers: int, count: int) -> int:
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=_append_many, args=(folder, w, count, go))
             for w in range(writers)]
    for p in procs:
        p.start()
    journal, reads = Journal(folder), 0
    go.set()
    try:
        while any(p.is_alive() for p in procs):
            events = journal.events()
            reads += 1
            assert all(e["pad"] == "x" * len(e["pad"]) for e in events)
    finally:
        for p in procs:
            p.join(timeout=30)
    assert [p.exitcode for p in procs] == [0] * writers
    final = journal.events("bulk")
    assert sorted((e["writer"], e["i"]) for e in final) == [
        (w, i) for w in range(writers) for i in range(count)]
    return reads


@pytest.mark.slow
def test_readers_never_fail_while_several_processes_append(tmp_path):
    # Lines of 8-24 KB span pages; a reader sees a write a page at a time, so most rounds
    # catch some line half written (a reader that parses every line fails in about one
    # round of four).
    reads = []
    for k in range(8):
        folder = tmp_path / f"round-{k}"
        folder.mkdir()
        reads.append(_stress_round(str(folder), writers=3, count=200))
    assert sum(reads) > 8, f"reads {reads} hardly overlapped the writers"


def test_a_rank_meeting_a_torn_line_finishes_and_the_check_reports_a_suite_error(
        tmp_path, monkeypatch):
    import reference.train as train

    folder = tmp_path / "journal"
    folder.mkdir()
    # A line another process left unterminated: the rank's first event lands after it.
    _write(folder, b'{"ev": "report", "rank": 3, "attem')
    # Its own start event lost in that line, the rank waits for its peers' starts until the
    # wait's deadline, then goes on. The rank runs in this process (local mode): the same
    # wait with a deadline of a second instead of 30.
    monkeypatch.setattr(probe, "_await_starts", lambda journal, attempt, world:
                        probe._await_ranks(journal, "start", attempt, world, timeout_s=1.0))
    script = Script(journal_dir=str(folder), train_module="reference.train", steps=2,
                    checkpoints={})
    trainer = train.DataParallelTrainer(
        probe.run_script, train_loop_config={"script": script},
        scaling_config=train.ScalingConfig(num_workers=0))
    assert trainer.fit().return_value == {"rank": 0, "attempt": 0, "world_size": 1}
    with pytest.raises(ProbeError, match="line 1 is not an event"):
        Journal(str(folder)).events()


ADAPTER = '''
import types
from conformance.adapters.base import Adapter

class FakeAdapter(Adapter):
    name = "fake"

    @property
    def train(self):
        return types.SimpleNamespace(__name__="fake_train")

    def version(self):
        return "0"

    def start_fit(self, make_trainer, deadline_s):
        raise NotImplementedError

def make():
    return FakeAdapter()
'''

CHECKS = '''
from conformance.catalogue import clause
from conformance.probe import Journal

@clause("report.layout")
def check_reads_a_broken_journal(impl, tmp_path):
    with open(tmp_path / "journal.jsonl", "w") as f:
        f.write('{"ev": "probe_error", "where": "_arrived", "error": "OSError: boom"}\\n')
    Journal(str(tmp_path)).events()
'''


@pytest.mark.slow
def test_the_report_counts_a_probe_failure_as_not_judged(pytester, monkeypatch):
    pytester.makepyfile(fake_adapter=ADAPTER)
    pytester.mkpydir("conformance_suite")
    checks = pytester.path / "conformance_suite" / "checks"
    checks.mkdir()
    (checks / "check_probe_failure.py").write_text(textwrap.dedent(CHECKS))
    pytester.makeini("[pytest]\npython_files = check_*.py\npython_functions = check_*\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess(
        "conformance_suite", "--impl", "fake_adapter:make", "--conformance-report", str(out),
        "-p", "no:cacheprovider", timeout=120)
    assert result.ret == 0, result.stdout.str()
    (check,) = json.loads((out / "fake.json").read_text())["checks"]
    assert check["status"] == "error"  # the suite's error, not a skip nor a failure
    assert "suite error" in check["reason"] and "_arrived" in check["reason"]
