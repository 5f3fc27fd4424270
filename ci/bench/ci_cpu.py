"""Where a command's CPU goes, per step: every process it started, from the kernel's
process accounting, charged to the step (a direct child of the command) it descends from.

    python ci/bench/ci_cpu.py record --out reports/pacct -- .ci/run
    python ci/bench/ci_cpu.py report reports/pacct [--top 12]

`record` (root, Debian's `acct` package: `accton`, `dump-acct`) turns process accounting
on for the whole machine into `--out`, runs the command, turns it off and reports (it
takes the machine's accounting over: one that was on, into another file, ends). The
kernel writes a record when a process exits, with its CPU time, parent and start time, so
nothing is sampled and short-lived processes (a Ray actor, a pip) count in full.
`report` prints, for each direct child of the command's root process (CI's steps: the
README's commands, Ray's suite, ...), the CPU-seconds of its whole tree, its start (seconds
after the root) and how long it ran; then the process names that used the most CPU
(Ray's actors are named `ray::<class>`, 15 characters kept). Processes that outlived
their parent and were reparented, and containers' processes, are listed apart: their
chain no longer leads to the root.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import subprocess
import sys


def read(path: str) -> dict[int, dict]:
    text = subprocess.run(["dump-acct", path], capture_output=True, text=True,
                          check=True).stdout
    procs = {}
    for line in text.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 14:
            continue
        # ticks of 1/100 s: user, system, elapsed; then pid and parent pid
        procs[int(f[9])] = {
            "name": f[0], "cpu": (float(f[2]) + float(f[3])) / 100,
            "elapsed": float(f[4]) / 100, "ppid": int(f[10]),
            "start": datetime.datetime.strptime(f[-1], "%a %b %d %H:%M:%S %Y")}
    return procs


def ancestors(procs: dict, pid: int) -> list[int]:
    chain = [pid]
    while procs.get(chain[-1], {}).get("ppid") in procs and len(chain) < 500:
        chain.append(procs[chain[-1]]["ppid"])
    return chain


def find_root(procs: dict) -> int:
    """The recorded process whose tree used the most CPU and that is not itself under a
    recorded parent: the command `record` ran (or its shell)."""
    tree = collections.Counter()
    for pid, p in procs.items():
        for a in ancestors(procs, pid):
            tree[a] += p["cpu"]
    tops = [pid for pid in tree if procs[pid]["ppid"] not in procs]
    return max(tops, key=tree.__getitem__)


def report(path: str, top: int, root: int | None = None) -> None:
    procs = read(path)
    if root not in procs:
        root = find_root(procs)
    t0 = procs[root]["start"]
    steps, outside = collections.Counter(), 0.0
    for pid, p in procs.items():
        chain = ancestors(procs, pid)
        if root not in chain:
            outside += p["cpu"]
            continue
        i = chain.index(root)
        steps[chain[i - 1] if i else root] += p["cpu"]
    total = sum(p["cpu"] for p in procs.values())
    print(f"{len(procs)} processes, {total:.0f} CPU-s in all; root {procs[root]['name']} "
          f"(pid {root}), {procs[root]['elapsed']:.0f} s")
    print(f"{'CPU-s':>8}  {'start s':>7}  {'ran s':>6}  step (the root's child)")
    for pid, cpu in steps.most_common(top):
        p = procs[pid]
        start = (p["start"] - t0).total_seconds()
        print(f"{cpu:8.1f}  {start:7.0f}  {p['elapsed']:6.0f}  {p['name']} (pid {pid})")
    print(f"{outside:8.1f}  not under the root (reparented, containers, other work)")
    names, counts = collections.Counter(), collections.Counter()
    for p in procs.values():
        names[p["name"]] += p["cpu"]
        counts[p["name"]] += 1
    print(f"\n{'CPU-s':>8}  {'count':>6}  {'each':>6}  process name")
    for name, cpu in names.most_common(top):
        print(f"{cpu:8.1f}  {counts[name]:6d}  {cpu / counts[name]:6.2f}  {name}")


def record(out: str, command: list[str], top: int) -> int:
    if os.geteuid() != 0:
        sys.exit("record: process accounting needs root (accton)")
    open(out, "wb").close()
    subprocess.run(["accton", out], check=True, stdout=subprocess.DEVNULL)
    try:
        child = subprocess.Popen(command)
        code = child.wait()
    finally:
        subprocess.run(["accton", "off"], check=False, stdout=subprocess.DEVNULL)
    report(out, top, child.pid)  # the machine's other processes are in the file too
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record", help="run a command with process accounting on")
    rec.add_argument("--out", required=True, help="the accounting file to write")
    rec.add_argument("--top", type=int, default=12)
    rec.add_argument("command", nargs="+")
    rep = sub.add_parser("report", help="report on an accounting file")
    rep.add_argument("path")
    rep.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    if args.what == "record":
        return record(args.out, args.command, args.top)
    report(args.path, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
