"""The suite's workspaces (`conformance.scenarios.workspace`) leave nothing in the temp dir:
removed when their process exits, or by the next process when it was killed; `keep()`
spares one for a post-mortem. Each case runs in a process of its own, with a temp dir of
the test's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

MAKE = textwrap.dedent("""
    import os, sys, time
    from conformance import scenarios
    made = [scenarios.workspace(), scenarios.workspace("trainspec-tune-")]
    with open(os.path.join(made[0], "journal.jsonl"), "w") as f:
        f.write("{}")
    os.makedirs(os.path.join(made[1], "storage", "run", "checkpoint_000000"))
    if "keep" in sys.argv:
        made.append(scenarios.keep(scenarios.workspace()))
    print(*made, flush=True)
    if "wait" in sys.argv:
        time.sleep(60)
""")


def start(tmp, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", MAKE, *args], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "TMPDIR": str(tmp)})


def made_by(child: subprocess.Popen, timeout_s: float = 30.0) -> list[str]:
    try:
        out, _ = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise
    assert child.returncode == 0, f"the workspace process exited with {child.returncode}"
    return out.split()


@pytest.fixture
def tmp(tmp_path):
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def test_a_process_leaves_no_workspace_behind(tmp):
    made = made_by(start(tmp))
    assert len(made) == 2 and all(path.startswith(str(tmp)) for path in made)
    assert os.listdir(tmp) == [], f"left in the temp dir: {os.listdir(tmp)}"


def test_a_killed_processs_workspaces_go_with_the_next_process(tmp):
    child = start(tmp, "wait")
    try:
        made = child.stdout.readline().split()
        assert len(made) == 2 and all(os.path.isdir(path) for path in made)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)
        child.stdout.close()
    assert all(os.path.isdir(path) for path in made)  # nothing of it could run at exit
    made_by(start(tmp))
    assert os.listdir(tmp) == [], f"left in the temp dir: {os.listdir(tmp)}"


def test_a_kept_workspace_stays_through_exit_and_the_next_process(tmp):
    *gone, kept = made_by(start(tmp, "keep"))
    made_by(start(tmp))
    assert os.path.isdir(kept)
    assert not any(os.path.exists(path) for path in gone)
    assert os.listdir(tmp) == [os.path.basename(os.path.dirname(kept))]
