"""Mutation testing of the reference against the conformance suite.

    python ci/mutation/run.py TARGET [--jobs 2] [--timeout S] [--limit N] [--resume]
    python ci/mutation/run.py TARGET --report-only
    python ci/mutation/run.py TARGET --from-report [--rejudge-survivors]

TARGET names an entry of `ci/mutation/targets.toml`: the modules to mutate and the
conformance checks that judge each mutant. cosmic-ray (`pip install -e '.[mutation]'`)
enumerates the mutants (`cosmic-ray init`: flipped comparisons, replaced operators and
numbers, `and`/`or`, `not` added, loops that never run, ...) into a session database,
`reports/mutation/TARGET.sqlite`, and makes each change. This runner applies them one at a
time, each in a private copy of the working tree (`--jobs` copies judge in parallel), runs
the checks there with `--impl reference` and a fixed Hypothesis seed, stops at the first
failing check, and kills the judging process group after `--timeout` seconds (a hang
counts as caught). The session keeps every result: `--resume` continues an interrupted
run, `cr-report reports/mutation/TARGET.sqlite` reads it with cosmic-ray's own tools.
The session is not kept in git; the report is, and `--from-report` starts a session from
it on a new clone (the mutants of code changed since are judged again).

Mutants that cannot change what an implementation shows are listed in
`ci/mutation/unobservable.toml`, each with its reason; they are left out of the score.
The report, `docs/reports/mutation/TARGET.md` (and `.json`), gives the score per module and
every survivor: file, line, the change, and what the unmutated line was.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ROOT / "ci" / "mutation" / "targets.toml"
UNOBSERVABLE = ROOT / "ci" / "mutation" / "unobservable.toml"
SEED = 20261203


@dataclasses.dataclass
class Target:
    name: str
    files: list[str]
    checks: list[str]
    exclude: list[str]
    timeout_s: float | None


def load_target(name: str, path: Path = TARGETS) -> Target:
    config = tomllib.loads(path.read_text())
    targets = config.get("targets", {})
    if name not in targets:
        raise SystemExit(f"target {name!r} is not in {path}: expected one of "
                         f"{', '.join(sorted(targets))}")
    entry, defaults = targets[name], config.get("defaults", {})
    return Target(name, list(entry["files"]), list(entry["checks"]),
                  list(defaults.get("exclude-operators", [])) + list(entry.get("exclude", [])),
                  entry.get("timeout"))


def judge_command(target: Target) -> list[str]:
    """The checks a mutant must fail: pytest, the reference, one seed, first failure ends."""
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
            "-p", "no:randomly", f"--hypothesis-seed={SEED}", "--impl", "reference",
            *target.checks]


# ------------------------------------------------------------------ the session
def open_session(target: Target, db_path: Path, resume: bool):
    """The cosmic-ray session of `target`: every mutant of its files, those of excluded
    operators recorded as skipped."""
    from cosmic_ray.commands import init
    from cosmic_ray.work_db import WorkDB

    db_path.parent.mkdir(parents=True, exist_ok=True)
    if db_path.exists() and not resume:
        db_path.unlink()
    fresh = not db_path.exists()
    if not fresh:
        check_files_unchanged(target, db_path)
    db = WorkDB(str(db_path), WorkDB.Mode.create)
    if fresh:
        cwd = os.getcwd()
        os.chdir(ROOT)  # cosmic-ray records module paths as given: relative to the root
        try:
            init([Path(f) for f in target.files], db, {})
        finally:
            os.chdir(cwd)
        skip_excluded(db, target, db.work_items)
        record_files(target, db_path)
    return db


def skip_excluded(db, target: Target, items) -> None:
    """Record the mutants of excluded operators among `items` as skipped."""
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    patterns = [re.compile(p) for p in target.exclude]
    for item in items:
        if any(p.search(item.mutations[0].operator_name) for p in patterns):
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                  output="operator excluded"))


def relist_changed(target: Target, db_path: Path) -> list[str]:
    """Replace the mutants (and their results) of the target's files that changed since the
    session listed them with the mutants of today's code, all pending; the other files keep
    their results. Returns the changed files."""
    import sqlite3

    from cosmic_ray.commands.init import _all_work_items
    from cosmic_ray.work_db import WorkDB

    with sqlite3.connect(db_path) as con:
        recorded = dict(con.execute("SELECT path, sha256 FROM trainspec_files"))
    changed = sorted(f for f, digest in file_digests(target).items()
                     if recorded.get(f) != digest)
    if not changed:
        return []
    marks = ",".join("?" * len(changed))
    with sqlite3.connect(db_path) as con:
        ids = [(r[0],) for r in con.execute(
            f"SELECT job_id FROM mutation_specs WHERE module_path IN ({marks})", changed)]
        for table in ("work_results", "mutation_specs", "work_items"):
            con.executemany(f"DELETE FROM {table} WHERE job_id = ?", ids)
    db = WorkDB(str(db_path), WorkDB.Mode.open)
    cwd = os.getcwd()
    os.chdir(ROOT)  # module paths as the session's first listing recorded them
    try:
        items = list(_all_work_items([Path(f) for f in changed], {}))
        db.add_work_items(items)
        skip_excluded(db, target, items)
    finally:
        os.chdir(cwd)
        db.close()
    record_files(target, db_path)
    return changed


def restore_from_report(target: Target, db_path: Path, report: Path) -> tuple[int, int]:
    """A new session of today's code whose verdicts come from a report this runner wrote
    (the session database is not kept in git; the report is): a mutant keeps its verdict
    where its file, operator, occurrence, line and unmutated line are the report's, or
    where only its line moved: its line's text is unchanged and that file holds as many
    mutants of that operator on lines of that text as the report did (the k-th of them,
    in line order, takes the report's k-th verdict). Every other mutant is pending.
    Returns (verdicts restored, mutants listed)."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    data = json.loads(report.read_text())
    if data.get("target") != target.name:
        raise SystemExit(f"--from-report: {report} is the report of "
                         f"{data.get('target')!r}, not of {target.name!r}")
    rows = {(r["file"], r["operator"], r["occurrence"]): r for r in data["mutants"]}
    old_by_text = _by_text((r["file"], r["operator"], r["text"], r["line"], r["occurrence"], r)
                           for r in data["mutants"])
    db = open_session(target, db_path, resume=False)
    restored = listed = 0
    try:
        judged = {job for job, _ in db.results}  # the excluded operators' skipped
        items = list(db.work_items)
        here, counts = {}, {}
        for key, group in _by_text(_text_key(i) + (i,) for i in items).items():
            here.update({i.job_id: (key, k) for k, i in enumerate(group)})
            counts[key] = len(group)
        for item in items:
            listed += 1
            spec = item.mutations[0]
            file, line = str(spec.module_path), spec.start_pos[0]
            row = rows.get((file, spec.operator_name, spec.occurrence))
            if row is None or row["line"] != line or row["text"] != source_line(file, line):
                key, k = here[item.job_id]
                moved = old_by_text.get(key, [])
                row = moved[k] if len(moved) == counts[key] else None
            if item.job_id in judged or row is None:
                continue
            status = row["status"]
            if status in ("killed", "timeout", "survived", "unobservable"):
                verdict = "survived" if status == "unobservable" else status
                outcome = TestOutcome.SURVIVED if verdict == "survived" \
                    else TestOutcome.KILLED
                result = WorkResult(worker_outcome=WorkerOutcome.NORMAL,
                                    test_outcome=outcome, diff=f"+{row['change']}",
                                    output=f"{verdict} (restored from {report.name} of "
                                           f"{data.get('date', '?')})")
            elif status == "no-test":
                result = WorkResult(worker_outcome=WorkerOutcome.NO_TEST)
            else:
                continue  # pending, or an error: judged again
            db.set_result(item.job_id, result)
            restored += 1
    finally:
        db.close()
    return restored, listed


def _text_key(item) -> tuple:
    spec = item.mutations[0]
    file, line = str(spec.module_path), spec.start_pos[0]
    return file, spec.operator_name, source_line(file, line), line, spec.occurrence


def _by_text(entries) -> dict[tuple, list]:
    """(file, operator, line text) -> the entries' payloads in (line, occurrence) order;
    entries are (file, operator, text, line, occurrence, payload)."""
    groups: dict[tuple, list] = {}
    for file, operator, text, line, occurrence, payload in entries:
        groups.setdefault((file, operator, text), []).append((line, occurrence, payload))
    return {key: [p for _, _, p in sorted(group, key=lambda g: g[:2])]
            for key, group in groups.items()}


def file_digests(target: Target) -> dict[str, str]:
    return {f: hashlib.sha256((ROOT / f).read_bytes()).hexdigest() for f in target.files}


def record_files(target: Target, db_path: Path) -> None:
    """Store the digests of the mutated files beside the session's mutants: a mutant is an
    occurrence number in one version of its file."""
    import sqlite3

    with sqlite3.connect(db_path) as con:
        con.execute("CREATE TABLE IF NOT EXISTS trainspec_files (path TEXT PRIMARY KEY, "
                    "sha256 TEXT)")
        con.executemany("INSERT OR REPLACE INTO trainspec_files VALUES (?, ?)",
                        sorted(file_digests(target).items()))


def check_files_unchanged(target: Target, db_path: Path) -> None:
    """Refuse to go on with a session whose files changed since its mutants were listed
    (its occurrences and line numbers would point at other code)."""
    import sqlite3

    with sqlite3.connect(db_path) as con:
        try:
            recorded = dict(con.execute("SELECT path, sha256 FROM trainspec_files"))
        except sqlite3.OperationalError:  # a session from before digests were kept
            recorded = None
    if recorded is None:
        print(f"{target.name}: the session at {db_path} has no file digests; recording "
              "today's (its results are trusted to match them)", file=sys.stderr)
        record_files(target, db_path)
        return
    changed = sorted(f for f, digest in file_digests(target).items()
                     if recorded.get(f) != digest)
    if changed:
        raise SystemExit(
            f"{target.name}: {', '.join(changed)} changed since the session at {db_path} "
            "listed its mutants; its results are for the old code. Run "
            f"`python ci/mutation/run.py {target.name}` without --resume, "
            "--rejudge-survivors or --report-only to start a new session, or add "
            "--relist-changed to judge only the changed files' mutants again.")


def forget_survivors(db_path: Path, unobservable: list[dict]) -> int:
    """Make the session's survivors pending again (after checks were added, to judge
    only those with the new checks), but not those recorded as unobservable; how many."""
    import sqlite3

    from cosmic_ray.work_db import WorkDB

    db = WorkDB(str(db_path), WorkDB.Mode.open)
    try:
        results = dict(db.results)
        pairs = [(item, results.get(item.job_id)) for item in db.work_items]
    finally:
        db.close()
    rows = classify(pairs, unobservable)
    again = [item.job_id for (item, _), row in zip(pairs, rows, strict=True)
             if row["status"] == "survived"]
    with sqlite3.connect(db_path) as con:
        con.executemany("DELETE FROM work_results WHERE job_id = ?", [(j,) for j in again])
    return len(again)


# ------------------------------------------------------------------ the workers
def make_copy(dest: Path) -> Path:
    """A private copy of the working tree (tracked and untracked, not ignored, files)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


def run_judge(command: list[str], cwd: Path, timeout_s: float) -> tuple[str, str, float]:
    """Run the checks in `cwd` (its `reference` shadows the installed one for every
    process started from there); ('killed'|'survived'|'timeout', output tail, seconds)."""
    env = dict(os.environ, PYTHONPATH=str(cwd), PYTHONDONTWRITEBYTECODE="1")
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        with _RUNNING_LOCK:
            if _STOPPING.is_set():
                raise RuntimeError("the runner is stopping: no new judge")
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            _RUNNING.add(proc)
        try:
            code = proc.wait(timeout=timeout_s)
            verdict = "survived" if code == 0 else "killed"
        except subprocess.TimeoutExpired:
            verdict = "timeout"
        finally:
            _kill_group(proc)
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        out.seek(0)
        text = out.read().decode(errors="replace")
    # what failed (pytest's `E` and FAILED lines) before the end of the output
    failed = [line for line in text.splitlines() if line.startswith(("E ", "FAILED"))][:40]
    tail = "\n".join(failed + ["...", text[-1500:]]) if failed else text[-3000:]
    return verdict, tail, time.monotonic() - started


#: the judging commands running now (each the leader of its own process group)
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()
_STOPPING = threading.Event()


def kill_running() -> None:
    """Kill every judging command still running and start no other (the runner is being
    stopped)."""
    with _RUNNING_LOCK:
        _STOPPING.set()
        procs = list(_RUNNING)
    for proc in procs:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGKILL the judging command's process group and wait until none of its members
    runs any more (a signal is delivered asynchronously: a child may still be running
    for a moment after killpg returns)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + grace_s
    while _live_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _live_members(pgid: int) -> list[int]:
    """The pids of the processes of group `pgid` that are not zombies."""
    live = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # the fields after the command's closing parenthesis: state, ppid, pgrp, ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(entry.name))
    return live


def judge_mutant(item, copy: Path, command: list[str], timeout_s: float):
    """Apply one mutant in `copy`, judge it, put the file back; a cosmic-ray WorkResult."""
    from cosmic_ray.mutating import _make_diff, mutate_code
    from cosmic_ray.plugins import get_operator
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    spec = item.mutations[0]
    path = copy / spec.module_path
    original = path.read_text()
    operator = get_operator(spec.operator_name)(**(spec.operator_args or {}))
    mutated = mutate_code(original, operator, spec.occurrence)
    if mutated is None:
        return WorkResult(worker_outcome=WorkerOutcome.NO_TEST)
    try:
        path.write_text(mutated)
        verdict, tail, seconds = run_judge(command, copy, timeout_s)
    finally:
        path.write_text(original)
    outcome = TestOutcome.SURVIVED if verdict == "survived" else TestOutcome.KILLED
    return WorkResult(worker_outcome=WorkerOutcome.NORMAL, test_outcome=outcome,
                      output=f"{verdict} after {seconds:.1f} s\n{tail}",
                      diff="\n".join(_make_diff(original, mutated, spec.module_path)))


def execute(db, target: Target, jobs: int, timeout_s: float | None, limit: int | None,
            log=print) -> float:
    """Judge the pending mutants of the session with `jobs` copies; the baseline seconds."""
    command = judge_command(target)
    pending = list(db.pending_work_items)
    if limit is not None:
        pending = pending[:limit]
    with tempfile.TemporaryDirectory(prefix="trainspec-mutation-") as tmp:
        copies = [make_copy(Path(tmp) / f"copy-{i}") for i in range(max(1, jobs))]
        verdict, tail, baseline = run_judge(command, copies[0], 3600)
        if verdict != "survived":
            raise SystemExit(f"the unmutated checks do not pass ({verdict}); fix that first:\n"
                             f"{tail}")
        timeout_s = timeout_s or target.timeout_s or max(60.0, 3 * baseline)
        log(f"{target.name}: unmutated checks pass in {baseline:.1f} s; {len(pending)} "
            f"mutants to judge with {len(copies)} copies, {timeout_s:.0f} s each at most")
        work: queue.Queue = queue.Queue()
        for item in pending:
            work.put(item)
        lock, done = threading.Lock(), [0]
        started = time.monotonic()

        def worker(copy: Path) -> None:
            while True:
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    return
                result = judge_mutant(item, copy, command, timeout_s)
                with lock:
                    db.set_result(item.job_id, result)
                    done[0] += 1
                    spec = item.mutations[0]
                    state = (result.output or "").split("\n", 1)[0] or result.worker_outcome
                    log(f"[{done[0]}/{len(pending)} {time.monotonic() - started:.0f} s] "
                        f"{spec.module_path}:{spec.start_pos[0]} {spec.operator_name} "
                        f"#{spec.occurrence}: {state}")

        threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in copies]
        stopping = _stop_on_sigterm()
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except BaseException:
            # Ctrl-C or SIGTERM: no judge outlives the runner; what was judged is kept
            while not work.empty():
                work.get_nowait()
            kill_running()
            raise
        finally:
            signal.signal(signal.SIGTERM, stopping)
    return baseline


def _stop_on_sigterm():
    """Make SIGTERM stop the runner as Ctrl-C does; the handler it replaces."""
    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    return signal.signal(signal.SIGTERM, stop)


# ------------------------------------------------------------------ the report
def load_unobservable(path: Path = UNOBSERVABLE) -> list[dict]:
    if not path.exists():
        return []
    entries = tomllib.loads(path.read_text()).get("mutant", [])
    for e in entries:
        missing = {"file", "operator", "line", "reason"} - set(e)
        if missing:
            raise SystemExit(f"{path}: an entry lacks {sorted(missing)}: {e}")
    return entries


def source_line(file: str, line: int) -> str:
    lines = (ROOT / file).read_text().splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def classify(items_and_results, unobservable: list[dict]) -> list[dict]:
    """One row per mutant: file, line, operator, occurrence, the unmutated line, and its
    status (killed | survived | timeout | unobservable | skipped | no-test | pending).
    An unobservable entry matches by file, operator and the unmutated line's text, so
    it keeps matching when lines move; where that text is on several lines, the entry's
    `after` (the text of the line before) tells them apart."""
    rows = []
    for item, result in items_and_results:
        spec = item.mutations[0]
        file, line = str(spec.module_path), spec.start_pos[0]
        text = source_line(file, line)
        row = dict(file=file, line=line, operator=spec.operator_name,
                   occurrence=spec.occurrence, text=text, reason="", change="")
        if result is None:
            row["status"] = "pending"
        elif result.worker_outcome == "skipped":
            row["status"] = "skipped"
        elif result.worker_outcome == "no-test":
            row["status"] = "no-test"
        elif result.worker_outcome != "normal":
            row["status"] = "error"
            row["reason"] = (result.output or "")[-300:]
        elif result.test_outcome == "killed":
            row["status"] = "timeout" if (result.output or "").startswith("timeout") \
                else "killed"
        else:
            row["status"] = "survived"
        if result is not None and result.diff:
            row["change"] = _changed_line(result.diff)
        if row["status"] == "survived":
            for e in unobservable:
                if (e["file"], e["line"].strip()) == (file, text) and \
                        e["operator"] in ("*", spec.operator_name) and \
                        e.get("after", "").strip() in ("", source_line(file, line - 1)):
                    row["status"], row["reason"] = "unobservable", e["reason"]
                    break
        rows.append(row)
    return rows


def _changed_line(diff) -> str:
    lines = diff if isinstance(diff, list) else str(diff).splitlines()
    return next((d[1:].strip() for d in lines if d.startswith("+") and not d.startswith("+++")),
                "")


def scores(rows: list[dict]) -> dict[str, dict]:
    """Per file and in all: counts by status and the score, caught / (caught + survived),
    with the unobservable, skipped and no-test mutants left out."""
    out: dict[str, dict] = {}
    for key in sorted({r["file"] for r in rows}) + ["all"]:
        mine = [r for r in rows if key == "all" or r["file"] == key]
        counts = {s: sum(r["status"] == s for r in mine)
                  for s in ("killed", "timeout", "survived", "unobservable", "skipped",
                            "no-test", "error", "pending")}
        caught = counts["killed"] + counts["timeout"]
        judged = caught + counts["survived"]
        counts["score"] = round(100.0 * caught / judged, 1) if judged else None
        # A run stopped early, or survivors not judged again yet: the score they would give
        # if every mutant not judged yet survived (a survivor waiting to be judged again
        # is pending, so the score alone would leave it out).
        floor = judged + counts["pending"]
        counts["floor"] = round(100.0 * caught / floor, 1) if floor else None
        out[key] = counts
    return out


def write_report(target: Target, rows: list[dict], baseline_s: float | None,
                 out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    table = scores(rows)
    data = dict(target=target.name, files=target.files, checks=target.checks, seed=SEED,
                baseline_s=baseline_s, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                scores=table, mutants=rows)
    (out_dir / f"{target.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    md = [f"# Mutation report: {target.name}", "",
          f"Generated {data['date']} by `python ci/mutation/run.py {target.name}` "
          f"(cosmic-ray mutants; Hypothesis seed {SEED}"
          + (f"; unmutated checks {baseline_s:.1f} s" if baseline_s else "") + ").", "",
          "Judged by: " + ", ".join(f"`{c}`" for c in target.checks) + ".", "",
          "| module | caught | of which timeouts | survived | unobservable | skipped "
          "(operator excluded) | not judged yet | score |", "|---|---|---|---|---|---|---|---|"]
    for key, c in table.items():
        score = "-" if c["score"] is None else f"{c['score']}%"
        if c["pending"] and c["floor"] is not None:
            score += f" ({c['floor']}% if the {c['pending']} not judged yet survive)"
        name = "**all**" if key == "all" else f"`{key}`"
        md.append(f"| {name} | {c['killed'] + c['timeout']} | {c['timeout']} | "
                  f"{c['survived']} | {c['unobservable']} | {c['skipped']} | "
                  f"{c['pending']} | {score} |")
    for status, title in (("survived", "Survivors"),
                          ("unobservable", "Recorded as unobservable")):
        chosen = [r for r in rows if r["status"] == status]
        md += ["", f"## {title} ({len(chosen)})", ""]
        if not chosen:
            md.append("None.")
            continue
        md += ["| file:line | operator | unmutated | mutated" +
               (" | reason |" if status == "unobservable" else " |"),
               "|---|---|---|---" + ("|---|" if status == "unobservable" else "|")]
        for r in sorted(chosen, key=lambda r: (r["file"], r["line"], r["operator"])):
            op = r["operator"].removeprefix("core/")
            cells = [f"{r['file']}:{r['line']}", op, f"`{_cell(r['text'])}`",
                     f"`{_cell(r['change'])}`"]
            if status == "unobservable":
                cells.append(_cell(r["reason"]))
            md.append("| " + " | ".join(cells) + " |")
    path = out_dir / f"{target.name}.md"
    path.write_text("\n".join(md) + "\n")
    return path


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="an entry of ci/mutation/targets.toml")
    parser.add_argument("--jobs", type=int, default=2,
                        help="copies of the tree judging in parallel (default 2)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per mutant (default: the target's, else 3x the "
                             "unmutated run, at least 60)")
    parser.add_argument("--limit", type=int, default=None,
                        help="judge at most N of the pending mutants (a trial run)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the session's results and judge what is still pending")
    parser.add_argument("--rejudge-survivors", action="store_true",
                        help="keep the session's results but judge its survivors again "
                             "(with the checks as they are now), then what is pending")
    parser.add_argument("--relist-changed", action="store_true",
                        help="with --resume or --rejudge-survivors: list again the mutants "
                             "of the files changed since the session listed them (their "
                             "results are dropped and they are judged again); the other "
                             "files keep their results")
    parser.add_argument("--from-report", action="store_true",
                        help="start the session anew from the report in --out (TARGET.json): "
                             "mutants unchanged since keep their verdicts, the others are "
                             "pending; then as --resume (with --rejudge-survivors, the "
                             "survivors are judged again)")
    parser.add_argument("--report-only", action="store_true",
                        help="write the report from the session as it is")
    parser.add_argument("--out", default=str(ROOT / "docs" / "reports" / "mutation"),
                        help="the report's folder (default docs/reports/mutation)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: expected 1 or more")
    target = load_target(args.target)
    db_path = ROOT / "reports" / "mutation" / f"{target.name}.sqlite"
    if args.from_report:
        if args.relist_changed:
            parser.error("--from-report already lists today's mutants: no --relist-changed")
        report = Path(args.out) / f"{target.name}.json"
        if not report.exists():
            parser.error(f"--from-report: no report of {target.name!r} at {report}")
        restored, listed = restore_from_report(target, db_path, report)
        print(f"{target.name}: {restored} of {listed} verdicts restored from {report}")
    if args.relist_changed:
        if not (args.resume or args.rejudge_survivors) or not db_path.exists():
            parser.error(f"--relist-changed: needs --resume or --rejudge-survivors and a "
                         f"session of {target.name!r} at {db_path}")
        changed = relist_changed(target, db_path)
        print(f"{target.name}: mutants listed again for {', '.join(changed) or 'no file'}")
    if args.rejudge_survivors:
        if not db_path.exists():
            parser.error(f"--rejudge-survivors: no session of {target.name!r} at {db_path}")
        again = forget_survivors(db_path, load_unobservable())
        print(f"{target.name}: {again} survivors to judge again")
    if args.report_only and not args.from_report and not db_path.exists():
        # a fresh session would judge nothing and overwrite the report with "pending"
        parser.error(f"--report-only: no session of {target.name!r} at {db_path}; add "
                     "--from-report to rewrite the report from its own JSON (after "
                     "unobservable.toml changed)")
    db = open_session(target, db_path, resume=args.resume or args.report_only or
                      args.rejudge_survivors or args.from_report)
    baseline = None
    try:
        if not args.report_only:
            baseline = execute(db, target, args.jobs, args.timeout, args.limit)
        results = dict(db.results)
        rows = classify([(item, results.get(item.job_id)) for item in db.work_items],
                        load_unobservable())
    finally:
        db.close()
    path = write_report(target, rows, baseline, Path(args.out))
    total = scores(rows)["all"]
    print(f"{target.name}: score {total['score']}% ({total['killed'] + total['timeout']} "
          f"caught, {total['survived']} survived, {total['unobservable']} unobservable, "
          f"{total['pending']} pending"
          + (f"; {total['floor']}% if they survive" if total["pending"] else "")
          + f"); report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
