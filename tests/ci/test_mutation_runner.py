"""ci/mutation/run.py: mutants of a toy module judged in a copy, the verdicts (caught,
survived, hang), the unobservable list, the score and the report."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")
from cosmic_ray.work_item import (  # noqa: E402
    MutationSpec,
    WorkerOutcome,
    WorkItem,
    WorkResult,  # noqa: E402
)
from cosmic_ray.work_item import TestOutcome as Outcome  # noqa: E402

MUTATION = Path(__file__).resolve().parents[2] / "ci" / "mutation"
if str(MUTATION) not in sys.path:  # ci/ is no package
    sys.path.insert(0, str(MUTATION))
run = importlib.import_module("run")

TOY = textwrap.dedent("""\
    def keep(scores, n):
        return sorted(scores)[-n:] if n > 0 else []
    """)
# the toy's checks: catch a change to the comparison, not one to the slice's sign...
JUDGE = [sys.executable, "-c",
         "import toy, sys; sys.exit(0 if toy.keep([3, 1, 2], 2) == [2, 3] "
         "and toy.keep([1], 0) == [] else 1)"]


def item(path: str, operator: str, occurrence: int, line: int = 2) -> WorkItem:
    return WorkItem.single(f"{operator}-{occurrence}", MutationSpec(
        module_path=path, operator_name=operator, occurrence=occurrence,
        start_pos=(line, 0), end_pos=(line, 1)))


def test_a_changed_comparison_is_caught_and_the_file_restored(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    result = run.judge_mutant(item("toy.py", "core/ReplaceComparisonOperator_Gt_GtE", 0),
                              tmp_path, JUDGE, timeout_s=30)
    assert result.worker_outcome == WorkerOutcome.NORMAL
    assert result.test_outcome == Outcome.KILLED
    assert result.output.startswith("killed")
    assert "+    return sorted(scores)[-n:] if n >= 0 else []" in result.diff
    assert (tmp_path / "toy.py").read_text() == TOY


def test_a_change_the_checks_miss_survives(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    # `n > 0` -> `n != 0`: the same on every input the checks try
    result = run.judge_mutant(item("toy.py", "core/ReplaceComparisonOperator_Gt_NotEq", 0),
                              tmp_path, JUDGE, timeout_s=30)
    assert result.test_outcome == Outcome.SURVIVED


def test_a_hang_is_caught_at_the_timeout_and_its_processes_killed(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    marker = tmp_path / "child.pid"
    hang = [sys.executable, "-c",
            "import subprocess, sys, time; "
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)"]
    verdict, _, seconds = run.run_judge(hang, tmp_path, timeout_s=8)  # time to start both
    assert verdict == "timeout"
    assert seconds < 40
    assert marker.exists(), "the judging command never started its child"
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_no_such_occurrence_is_no_test(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    result = run.judge_mutant(item("toy.py", "core/ReplaceComparisonOperator_Gt_GtE", 5),
                              tmp_path, JUDGE, timeout_s=30)
    assert result.worker_outcome == WorkerOutcome.NO_TEST


def test_classify_scores_and_report(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "toy.py").write_text(TOY)
    normal = WorkerOutcome.NORMAL
    pairs = [
        (item("toy.py", "core/A", 0), WorkResult(normal, "killed after 1.0 s",
                                                 Outcome.KILLED, "+x")),
        (item("toy.py", "core/B", 0), WorkResult(normal, "timeout after 9.0 s",
                                                 Outcome.KILLED)),
        (item("toy.py", "core/C", 0), WorkResult(normal, "survived after 1.0 s",
                                                 Outcome.SURVIVED, "+y")),
        (item("toy.py", "core/D", 0), WorkResult(normal, "survived after 1.0 s",
                                                 Outcome.SURVIVED)),
        (item("toy.py", "core/E", 0), WorkResult(WorkerOutcome.SKIPPED, "operator excluded")),
        (item("toy.py", "core/F", 0), None),
    ]
    unobservable = [dict(file="toy.py", operator="core/D", reason="same results",
                         line="return sorted(scores)[-n:] if n > 0 else []")]
    rows = run.classify(pairs, unobservable)
    assert [r["status"] for r in rows] == ["killed", "timeout", "survived", "unobservable",
                                           "skipped", "pending"]
    assert rows[2]["change"] == "y"
    assert rows[3]["reason"] == "same results"
    total = run.scores(rows)["all"]
    assert (total["killed"], total["timeout"], total["survived"]) == (1, 1, 1)
    assert total["score"] == pytest.approx(66.7)
    assert total["floor"] == pytest.approx(50.0)  # the pending one counted as a survivor
    target = run.Target("toy", ["toy.py"], ["check_toy.py"], [], None)
    path = run.write_report(target, rows, 1.5, tmp_path / "out")
    text = path.read_text()
    assert ("| `toy.py` | 2 | 1 | 1 | 1 | 1 | 1 | 66.7% (50.0% if the 1 not judged yet "
            "survive) |") in text
    assert "## Survivors (1)" in text and "toy.py:2 | C |" in text
    assert "## Recorded as unobservable (1)" in text and "same results" in text


def test_unobservable_entries_need_a_reason(tmp_path):
    bad = tmp_path / "u.toml"
    bad.write_text('[[mutant]]\nfile = "a.py"\noperator = "core/A"\nline = "x"\n')
    with pytest.raises(SystemExit, match="reason"):
        run.load_unobservable(bad)


def test_every_target_names_files_and_checks_that_exist():
    root = MUTATION.parents[1]
    import tomllib

    names = tomllib.loads((MUTATION / "targets.toml").read_text())["targets"]
    assert {"retention", "controller", "storage", "session"} <= set(names)
    for name in names:
        target = run.load_target(name)
        for rel in target.files + target.checks:
            assert (root / rel.split("::")[0]).exists(), f"{name}: {rel}"
    with pytest.raises(SystemExit, match="expected one of"):
        run.load_target("nope")


def test_forgetting_survivors_makes_only_them_pending_again(tmp_path, monkeypatch):
    from cosmic_ray.work_db import WorkDB

    monkeypatch.setattr(run, "ROOT", tmp_path)
    db_path = tmp_path / "s.sqlite"
    db = WorkDB(str(db_path), WorkDB.Mode.create)
    (tmp_path / "toy.py").write_text(TOY)
    items = {name: item("toy.py", f"core/{name}", 0) for name in "KSUX"}
    for it in items.values():
        db.add_work_item(it)
    normal = WorkerOutcome.NORMAL
    db.set_result(items["K"].job_id, WorkResult(normal, "killed", Outcome.KILLED))
    db.set_result(items["S"].job_id, WorkResult(normal, "survived", Outcome.SURVIVED))
    db.set_result(items["U"].job_id, WorkResult(normal, "survived", Outcome.SURVIVED))
    db.set_result(items["X"].job_id, WorkResult(WorkerOutcome.SKIPPED, "operator excluded"))
    db.close()
    # an unobservable entry with operator "*" covers every mutant of its line; here only U's
    unobservable = [dict(file="toy.py", operator="core/U", reason="same results",
                         line="return sorted(scores)[-n:] if n > 0 else []")]
    assert run.forget_survivors(db_path, unobservable) == 1
    db = WorkDB(str(db_path), WorkDB.Mode.open)
    try:
        assert [i.job_id for i in db.pending_work_items] == [items["S"].job_id]
        assert {job for job, _ in db.results} == {items[n].job_id for n in "KUX"}
    finally:
        db.close()


def test_an_unobservable_entry_with_operator_star_covers_its_whole_line(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "toy.py").write_text(TOY)
    survived = WorkResult(WorkerOutcome.NORMAL, "survived", Outcome.SURVIVED)
    pairs = [(item("toy.py", f"core/{op}", 0), survived) for op in ("A", "B")] + \
        [(item("toy.py", "core/C", 0, line=1), survived)]
    entry = dict(file="toy.py", operator="*", reason="r",
                 line="return sorted(scores)[-n:] if n > 0 else []")
    assert [r["status"] for r in run.classify(pairs, [entry])] == \
        ["unobservable", "unobservable", "survived"]


def test_an_entry_with_after_matches_only_the_line_after_that_text(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "twice.py").write_text("a = 1\nx = 0\nb = 2\nx = 0\n")
    survived = WorkResult(WorkerOutcome.NORMAL, "survived", Outcome.SURVIVED)
    pairs = [(item("twice.py", "core/N", 0, line=2), survived),
             (item("twice.py", "core/N", 1, line=4), survived)]
    entry = dict(file="twice.py", operator="*", reason="r", line="x = 0", after="b = 2")
    assert [r["status"] for r in run.classify(pairs, [entry])] == ["survived", "unobservable"]
    del entry["after"]
    assert [r["status"] for r in run.classify(pairs, [entry])] == ["unobservable"] * 2


def test_a_session_whose_files_changed_is_not_resumed(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "toy.py").write_text(TOY)
    target = run.Target("toy", ["toy.py"], [], [], None)
    db_path = tmp_path / "toy.sqlite"
    run.open_session(target, db_path, resume=False).close()
    run.open_session(target, db_path, resume=True).close()  # the same file: it goes on
    (tmp_path / "toy.py").write_text("# a new first line moves every mutant\n" + TOY)
    with pytest.raises(SystemExit, match="toy.py changed since the session"):
        run.open_session(target, db_path, resume=True)
    db = run.open_session(target, db_path, resume=False)  # a new session of the new file
    try:
        assert {i.mutations[0].start_pos[0] for i in db.work_items} == {3}
    finally:
        db.close()


def test_relisting_a_changed_file_keeps_the_other_files_results(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "toy.py").write_text(TOY)
    (tmp_path / "other.py").write_text("def f(x):\n    return x + 1\n")
    target = run.Target("toy", ["toy.py", "other.py"], [], [r"core/NumberReplacer"], None)
    db_path = tmp_path / "toy.sqlite"
    db = run.open_session(target, db_path, resume=False)
    try:
        for it in db.work_items:
            if it.mutations[0].operator_name != "core/NumberReplacer":
                db.set_result(it.job_id, WorkResult(WorkerOutcome.NORMAL, "killed",
                                                    Outcome.KILLED))
        other = {i.job_id for i in db.work_items if str(i.mutations[0].module_path) ==
                 "other.py"}
        judged = {job for job, _ in db.results}
    finally:
        db.close()
    assert run.relist_changed(target, db_path) == []  # nothing changed: nothing relisted
    (tmp_path / "toy.py").write_text("# a new first line moves every mutant\n" + TOY)
    assert run.relist_changed(target, db_path) == ["toy.py"]
    db = run.open_session(target, db_path, resume=True)  # the digests match again
    try:
        items = list(db.work_items)
        results = dict(db.results)
        toy = [i for i in items if str(i.mutations[0].module_path) == "toy.py"]
        assert toy and {i.mutations[0].start_pos[0] for i in toy} == {3}
        # the other file keeps its mutants and verdicts; toy's are pending, except those
        # of the excluded operator, skipped again
        assert {i.job_id for i in items if i not in toy} == other
        assert other <= judged and all(results[j].test_outcome == Outcome.KILLED
                                       for j in other if results[j].output == "killed")
        for i in toy:
            if i.mutations[0].operator_name == "core/NumberReplacer":
                assert results[i.job_id].worker_outcome == WorkerOutcome.SKIPPED
            else:
                assert i.job_id not in results
    finally:
        db.close()


def test_stopping_the_runner_kills_the_judge_running_and_starts_none(tmp_path, monkeypatch):
    import os
    import signal
    import threading
    import time

    monkeypatch.setattr(run, "_STOPPING", threading.Event())
    marker = tmp_path / "child.pid"
    hang = [sys.executable, "-c",
            "import subprocess, sys, time; "
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)"]
    verdicts = []
    judge = threading.Thread(target=lambda: verdicts.append(
        run.run_judge(hang, tmp_path, timeout_s=50)[0]))
    judge.start()
    deadline = time.monotonic() + 20
    # the pid written, not only the file made (a kill between the two left it empty)
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists() and marker.read_text(), "the judging command never started its child"
    # SIGTERM reaches the runner as KeyboardInterrupt, as Ctrl-C does
    previous = run._stop_on_sigterm()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        signal.signal(signal.SIGTERM, previous)
    started = time.monotonic()
    run.kill_running()
    judge.join(20)
    assert not judge.is_alive() and time.monotonic() - started < 15
    assert verdicts == ["killed"]  # SIGKILLed before its 50 s timeout
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    with pytest.raises(RuntimeError, match="stopping"):
        run.run_judge(hang, tmp_path, timeout_s=50)


def test_a_session_restored_from_its_report_keeps_the_verdicts_of_unchanged_lines(
        tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "toy.py").write_text(TOY)
    (tmp_path / "other.py").write_text("def f(x):\n    return x + 1\n")
    target = run.Target("toy", ["toy.py", "other.py"], [], [r"core/NumberReplacer"], None)
    db_path = tmp_path / "toy.sqlite"
    db = run.open_session(target, db_path, resume=False)
    try:
        verdicts = {}
        for n, it in enumerate(db.work_items):
            if it.mutations[0].operator_name == "core/NumberReplacer":
                continue
            outcome = Outcome.KILLED if n % 2 else Outcome.SURVIVED
            db.set_result(it.job_id, WorkResult(WorkerOutcome.NORMAL, outcome.value,
                                                outcome, diff="+changed"))
            spec = it.mutations[0]
            verdicts[(str(spec.module_path), spec.operator_name, spec.occurrence)] = \
                "killed" if n % 2 else "survived"
        results = dict(db.results)
        rows = run.classify([(i, results.get(i.job_id)) for i in db.work_items], [])
    finally:
        db.close()
    run.write_report(target, rows, None, tmp_path / "out")
    db_path.unlink()  # a new clone: the report, no session
    # a new first line moves toy's mutants, whose lines are unchanged: they keep their
    # verdicts; other.py's one line is changed: its mutants are judged again
    (tmp_path / "toy.py").write_text("# a new first line moves every mutant\n" + TOY)
    (tmp_path / "other.py").write_text("def f(x):\n    return x - 1\n")
    restored, listed = run.restore_from_report(target, db_path, tmp_path / "out" / "toy.json")
    toy = [k for k in verdicts if k[0] == "toy.py"]
    assert toy and restored == len(toy)
    db = run.open_session(target, db_path, resume=True)
    try:
        assert len(list(db.work_items)) == listed
        results = dict(db.results)
        for it in db.work_items:
            spec = it.mutations[0]
            key = (str(spec.module_path), spec.operator_name, spec.occurrence)
            result = results.get(it.job_id)
            if spec.operator_name == "core/NumberReplacer":
                assert result.worker_outcome == WorkerOutcome.SKIPPED
            elif key[0] == "other.py":  # changed: judged again
                assert result is None
            else:
                assert result.test_outcome.value == verdicts[key]
        rows = run.classify([(i, results.get(i.job_id)) for i in db.work_items], [])
        assert {r["change"] for r in rows if r["file"] == "toy.py" and
                r["status"] in ("killed", "survived")} == {"changed"}
        assert {r["line"] for r in rows if r["file"] == "toy.py"} == {3}  # moved from 2
    finally:
        db.close()
    with pytest.raises(SystemExit, match="not of 'other'"):
        run.restore_from_report(run.Target("other", ["other.py"], [], [], None),
                                tmp_path / "o.sqlite", tmp_path / "out" / "toy.json")


def test_report_only_without_a_session_leaves_the_report_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "toy.py").write_text(TOY)
    monkeypatch.setattr(run, "load_target",
                        lambda name: run.Target(name, ["toy.py"], [], [], None))
    out = tmp_path / "out"
    out.mkdir()
    (out / "toy.json").write_text('{"kept": true}')
    with pytest.raises(SystemExit) as stopped:
        run.main(["toy", "--report-only", "--out", str(out)])
    assert stopped.value.code == 2  # argparse's usage error
    assert (out / "toy.json").read_text() == '{"kept": true}'
    assert not (out / "toy.md").exists()
