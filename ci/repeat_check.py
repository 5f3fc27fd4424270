"""Run conformance checks many times in a row, each in a fresh pytest, on a loaded machine.

    python ci/repeat_check.py conformance/checks/check_faults.py::check_acknowledged_checkpoint_survives \
        --runs 20 --load 2

A check that passes once proves little about timing: this runs the given pytest node ids
`--runs` times (a fresh interpreter each time, so nothing is cached between runs) while
`--load` busy processes keep the cores occupied, and prints each run's outcome, its
seconds and the load average beside it. It exits non-zero if any run failed, and stops the
load processes whatever happens.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="+", help="pytest node ids (file::check)")
    parser.add_argument("--runs", type=int, default=20, help="how many runs (default 20)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1,
                        help="busy processes beside the runs (default: one per core)")
    parser.add_argument("--impl", default="reference", help="the implementation (default "
                        "reference)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one run may take (default 600)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.load < 0:
        parser.error(f"--load must be 0 or more, got {args.load}")

    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    if spinners:
        print(f"load: {len(spinners)} busy processes {[p.pid for p in spinners]}", flush=True)
    failed = []
    try:
        for i in range(1, args.runs + 1):
            started = time.monotonic()
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "--impl", args.impl, *args.checks]
            output = ""
            try:
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                      timeout=args.timeout)
                ok, output = proc.returncode == 0, proc.stdout + proc.stderr
                tail = proc.stdout.strip().splitlines()[-1:]
            except subprocess.TimeoutExpired:
                ok, tail = False, [f"timed out after {args.timeout:.0f} s"]
            load1 = os.getloadavg()[0]
            print(f"run {i}/{args.runs}: {'pass' if ok else 'FAIL'} in "
                  f"{time.monotonic() - started:.1f} s (load {load1:.1f}) "
                  f"{tail[0] if tail else ''}", flush=True)
            if not ok:
                failed.append(i)
                print(output[-4000:], flush=True)
    finally:
        for p in spinners:
            p.kill()
            p.join()
    print(f"{args.runs - len(failed)} of {args.runs} runs passed with {args.load} busy "
          f"processes on {os.cpu_count()} cores" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
