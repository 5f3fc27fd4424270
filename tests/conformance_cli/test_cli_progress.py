"""`python -m conformance run` shows progress on stderr (plain lines when stderr is not a
terminal) and writes the HTML report beside JSON and Markdown; plain `pytest conformance/`
(what CI runs) shows none unless asked. The commands run for real, in child processes."""

import re

import pytest
from conformance_cli_run import run

FAST = "check_sync_config or check_preemption_info_value"
LINE = re.compile(r"^\[(\d+)/(\d+)\] \d\d:\d\d (check_surface\.py::check_\w+) \.\.\. (\w+)$", re.M)


@pytest.mark.slow
def test_run_prints_one_plain_progress_line_per_check(tmp_path):
    result = run("run", "--impl", "reference", "--out", str(tmp_path), "--", "-k", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = LINE.findall(result.stderr)
    assert [(n, total, outcome) for n, total, _, outcome in lines] == [
        ("1", "2", "passed"), ("2", "2", "passed")], result.stderr
    assert {name for *_, name, _ in lines} == {
        "check_surface.py::check_sync_config", "check_surface.py::check_preemption_info_value"}
    assert re.search(r"^conformance: reference: 2/2 done in \d\d:\d\d \(2 passed\)$",
                     result.stderr, re.M), result.stderr
    # pytest's own per-check letters stay out of the way; its summary stays
    assert not re.search(r"^\.+\s*$", result.stdout, re.M), result.stdout
    assert "2 passed" in result.stdout
    for ext in ("json", "md", "html"):
        assert (tmp_path / f"reference.{ext}").is_file(), ext
    html = (tmp_path / "reference.html").read_text()
    assert '<td class="status-pass">pass</td>' in html


@pytest.mark.slow
def test_run_progress_off_prints_no_lines(tmp_path):
    result = run("run", "--impl", "reference", "--out", str(tmp_path), "--progress", "off",
                 "--", "-k", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not LINE.search(result.stderr), result.stderr


@pytest.mark.slow
def test_plain_pytest_run_shows_no_progress_unless_asked(tmp_path):
    base = ["-m", "pytest", "conformance/checks", "--impl", "reference", "-q", "-p",
            "no:cacheprovider", "-o", "python_files=check_*.py", "-o",
            "python_functions=check_*", "-k", FAST]
    quiet = run(*base)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert not LINE.search(quiet.stderr) and "2 passed" in quiet.stdout
    shown = run(*base, "--conformance-progress", "--conformance-progress-style", "plain")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert len(LINE.findall(shown.stderr)) == 2, shown.stderr
