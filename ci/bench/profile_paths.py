"""py-spy profiles of the reference's TorchTrainer start and recovery paths, warm.

    python ci/bench/profile_paths.py [--out docs/profiles] [--fits 20] [--rate 200]

Starts the embedded cluster, runs one untimed TorchTrainer fit (the first fit preloads torch
on the nodes), then records, with one `py-spy record` per process (the driver and every
node process: the supervisors and the workers they fork, `--subprocesses`), while

- `start`: N consecutive no-op 2-worker TorchTrainer fits run;
- `recovery`: N/2 TorchTrainer fits whose rank 1 SIGKILLs itself before its 2nd report
  (`max_failures=1`), so the group is torn down, the gloo process group formed again and
  the function run again on every rank.

Writes to --out, per PATH: PATH-driver.txt.gz and PATH-nodes.txt.gz, py-spy's raw
collapsed stacks (open them in https://www.speedscope.app or any flame graph tool, e.g.
`zcat start-nodes.txt.gz | flamegraph.pl > start-nodes.svg`), and PATH-summary.txt: the
fit times under the profiler and the functions on the most sampled stacks, per side. Needs py-spy (`pip install py-spy`) and root or
ptrace permission over the cluster's processes.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def noop(config):
    import reference.train as t

    t.report({"ok": 1})


def recovery(config):
    import os as _os
    import signal as _signal

    import reference.train as t

    rank = t.get_context().get_world_rank()
    first = t.get_checkpoint() is None
    for step in range(2):
        if first and rank == 1 and step == 1:
            _os.kill(_os.getpid(), _signal.SIGKILL)
        folder = _os.path.join(config["dir"], f"r{rank}-s{step}-{int(first)}")
        _os.makedirs(folder, exist_ok=True)
        t.report({"step": step}, checkpoint=t.Checkpoint.from_directory(folder))


def node_pids(root: int) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process(root).children(recursive=False)]


def record(pid: int, out: str, rate: int, subprocesses: bool) -> subprocess.Popen:
    cmd = ["py-spy", "record", "--pid", str(pid), "-r", str(rate), "-f", "raw", "-o", out,
           "--nonblocking"]
    if subprocesses:
        cmd.append("--subprocesses")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()


def summarize(raw_files: list[str], top: int = 12):
    """Samples; the leaf functions holding the most of them (self); the functions on the
    most stacks (inclusive, each once per stack), leaving out those on nearly every stack
    (the process's entry frames)."""
    own: collections.Counter = collections.Counter()
    on: collections.Counter = collections.Counter()
    total = 0
    for path in raw_files:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                stack, _, n = line.rstrip("\n").rpartition(" ")
                if not n.isdigit():
                    continue
                frames = stack.split(";")[1:]  # the first is the process
                if not frames:
                    continue
                total += int(n)
                own[frames[-1]] += int(n)
                for fn in set(frames):
                    on[fn] += int(n)
    inclusive = [(fn, n) for fn, n in on.most_common() if n < 0.9 * total][:top]
    return total, own.most_common(top), inclusive


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/profiles")
    parser.add_argument("--fits", type=int, default=20)
    parser.add_argument("--rate", type=int, default=200)
    args = parser.parse_args()
    if shutil.which("py-spy") is None:
        parser.error("py-spy is not installed: pip install py-spy")
    os.makedirs(args.out, exist_ok=True)

    import reference
    from reference.train import FailureConfig, RunConfig, ScalingConfig
    from reference.train.torch import TorchTrainer

    work = tempfile.mkdtemp(prefix="trainspec-profile-")
    reference.init(num_cpus=4)
    try:
        def trainer(fn, name, **kw):
            return TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=2),
                                run_config=RunConfig(name=name, storage_path=work, **kw),
                                train_loop_config={"dir": work})

        trainer(noop, "warmup").fit()
        roots = node_pids(os.getpid())  # the node factory: every node and worker below it
        for path in ("start", "recovery"):
            raws = {"driver": [os.path.join(work, f"{path}-driver.txt")],
                    "nodes": [os.path.join(work, f"{path}-nodes{i}.txt")
                              for i in range(len(roots))]}
            procs = [record(os.getpid(), raws["driver"][0], args.rate, False)]
            procs += [record(pid, raws["nodes"][i], args.rate, True)
                      for i, pid in enumerate(roots)]
            time.sleep(1.0)  # py-spy attached
            times = []
            for i in range(args.fits if path == "start" else max(1, args.fits // 2)):
                t = (trainer(noop, f"fit{i}") if path == "start" else
                     trainer(recovery, f"recovery{i}",
                             failure_config=FailureConfig(max_failures=1)))
                t0 = time.perf_counter()
                t.fit()
                times.append(time.perf_counter() - t0)
            stop(procs)
            times.sort()
            lines = [f"== {path}: {len(times)} TorchTrainer fit(s) under the profiler, median "
                     f"{times[len(times) // 2] * 1e3:.1f} ms (py-spy at {args.rate}/s)"]
            for side, files in raws.items():
                total, own, inclusive = summarize(files)
                lines.append(f"-- {side}: {total} samples ({total / args.rate:.2f} s of "
                             "sampled running thread time)")
                for title, rows in (("self", own), ("inclusive", inclusive)):
                    lines.append(f"   {title}:")
                    lines += [f"{100.0 * n / max(total, 1):6.1f}%  {fn}" for fn, n in rows]
                with gzip.open(os.path.join(args.out, f"{path}-{side}.txt.gz"), "wt") as out:
                    for name in files:
                        if os.path.exists(name):
                            with open(name) as f:
                                shutil.copyfileobj(f, out)
            text = "\n".join(lines) + "\n"
            with open(os.path.join(args.out, f"{path}-summary.txt"), "w") as f:
                f.write(text)
            print(text)
    finally:
        reference.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
