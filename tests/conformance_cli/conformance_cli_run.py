"""Runs the real `python -m conformance ...` (or `python -m pytest ...`) in a child process
with a deadline; shared by the tests of this folder (a module of its own, not a conftest)."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEADLINE_S = 300


def run(*args: str, env: dict | None = None, cwd: str = REPO) -> subprocess.CompletedProcess:
    """`python -m conformance *args` (or `python -m <args>` when args[0] is "-m"), stdout and
    stderr captured separately, stdin closed, stderr not a terminal."""
    argv = [sys.executable, *args] if args[0] == "-m" else [
        sys.executable, "-m", "conformance", *args]
    full_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    full_env.pop("TRAINSPEC_IMPL", None)
    return subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=DEADLINE_S)


def hidden_ray(folder) -> dict:
    """Environment in which `import ray` raises ImportError: a `ray` package that refuses to
    import, first on PYTHONPATH (ahead of the installed Ray)."""
    package = folder / "ray"
    package.mkdir()
    (package / "__init__.py").write_text(
        'raise ImportError("No module named \'ray\' (hidden by the test)")\n')
    return {"PYTHONPATH": os.pathsep.join(
        p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)}
