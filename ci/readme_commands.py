"""The README's quick start, run verbatim: the two commands a new user runs first.

    python ci/readme_commands.py [--list] [--only 1|2]

Reads the two one-line ```bash blocks of the README's "## Quick start" section (so the
commands CI runs cannot drift from the ones the README shows) and runs each in a shell at
the checkout's root, printing its seconds. The first sets up `.venv` and runs the main job;
the second installs the test extras into the same venv and runs the unit tests, with
`PYTEST_ADDOPTS` adding a JUnit report (`reports/readme-tests.xml`, which
`ci/rerun_skipped.py` reads) and the 25 slowest tests, without changing the command's text.
Run it on a checkout without `.venv`: that is the fresh machine the README promises.
`--only N` runs command N alone (CI runs the two as steps of their own, with work beside
each; command 2 expects what command 1 left).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JUNIT = os.path.join("reports", "readme-tests.xml")


def quick_start_commands(readme: str) -> list[str]:
    """The commands of the quick start's ```bash blocks, in order; exactly two, one line each."""
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", readme, re.M | re.S)
    if section is None:
        raise SystemExit("README.md has no '## Quick start' section")
    blocks = re.findall(r"^```bash\n(.*?)^```", section.group(1), re.M | re.S)
    commands = [b.strip() for b in blocks]
    if len(commands) != 2 or any("\n" in c or not c for c in commands):
        raise SystemExit(f"README.md's quick start must hold two one-line bash blocks, found "
                         f"{commands!r}")
    return commands


def main(argv: list[str]) -> int:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        commands = quick_start_commands(f.read())
    if "--list" in argv:
        print("\n".join(commands))
        return 0
    only = None
    if "--only" in argv:
        at = argv.index("--only")
        value = argv[at + 1] if at + 1 < len(argv) else ""
        if value not in ("1", "2"):
            raise SystemExit(f"--only takes 1 or 2 (the quick start's commands), not {value!r}")
        only = int(value)
    os.makedirs(os.path.join(ROOT, "reports"), exist_ok=True)
    for index, command in enumerate(commands, 1):
        if only is not None and index != only:
            continue
        env = dict(os.environ)
        if index == 2:
            env["PYTEST_ADDOPTS"] = f"--junitxml={JUNIT} --durations=25"
        print(f"=== README quick start, command {index}: {command}", flush=True)
        started = time.monotonic()
        code = subprocess.call(["bash", "-c", command], cwd=ROOT, env=env)
        print(f"README command {index}: exit {code}, {time.monotonic() - started:.0f} s",
              flush=True)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
