"""simcluster providers side by side (not a test): the docker provider beside the process one.

    python ci/bench/provider_bench.py [--rounds 3] [--providers process,docker] [--nodes 8]
                                      [--fits 5]

Each round runs every provider in a fresh process (the order alternating between rounds),
and each of those measures, with public APIs only (`simcluster.Cluster`, `reference.init`,
`reference.train`):

  start    `Cluster(nodes=[NodeSpec(cpus=1)] * N, preload=reference.PRELOAD)` until every
           node is up, then `close()` of that cluster;
  no-op    on a fresh 2-node cluster, the first no-op 2-worker `DataParallelTrainer.fit()`
           and the median of `--fits` more;
  torch    on that cluster, `TorchTrainer.fit()` of 2 workers that join a gloo process group
           and all-reduce a tensor (the median of `--fits` fits after one untimed);
  recovery on 3 one-CPU nodes, a 2-worker fit with `FailureConfig(max_failures=1)` that
           reports every 50 ms; once both ranks run, the node of rank 1 is killed
           (`Cluster.kill_node`; for docker the container ends with it), and the figure is
           the time from the kill to the training function running again on both ranks
           (each rank writes `time.time()` when its function starts, into a file on the
           storage the nodes share).

Prints one table: median [min..max] over the rounds, and docker / process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MEASURES = (
    ("start", "cluster start, {nodes} nodes, every node up"),
    ("close", "cluster close, {nodes} nodes"),
    ("noop_first", "no-op fit, 2 workers on 2 nodes (1st on the cluster)"),
    ("noop", "no-op fit, 2 workers on 2 nodes (median of {fits})"),
    ("torch", "TorchTrainer fit, 2 workers, gloo all-reduce (median of {fits})"),
    ("recovery", "node killed -> train fn running again on both ranks"),
)


# ----------------------------------------------------------------- training functions
def noop(config):
    pass


def allreduce(config):
    import torch
    import torch.distributed as dist

    from reference import train

    x = torch.ones(4)
    dist.all_reduce(x)
    train.report({"sum": float(x[0])})


def restartable(config):
    """Writes (rank, time) on start; a restarted function (the file already holds both
    ranks of the first attempt) returns at once, the first attempt reports until killed."""
    from reference import train

    rank = train.get_context().get_world_rank()
    path = config["starts"]
    with open(path) as f:
        restarted = len(f.read().splitlines()) >= 2
    with open(path, "a") as f:
        f.write(json.dumps({"rank": rank, "t": time.time(),
                            "node": os.environ.get("SIMCLUSTER_NODE_ID")}) + "\n")
    if restarted:
        return
    for i in range(600):
        train.report({"i": i})
        time.sleep(0.05)


# ----------------------------------------------------------------------------- child
def _fit(trainer_cls, fn, folder: str, **kw) -> float:
    from reference.train import RunConfig, ScalingConfig

    trainer = trainer_cls(fn, scaling_config=ScalingConfig(num_workers=2),
                          run_config=RunConfig(storage_path=folder, **kw.pop("run", {})), **kw)
    t0 = time.perf_counter()
    trainer.fit()
    return time.perf_counter() - t0


def child(provider: str, nodes: int, fits: int) -> dict:
    import reference
    from reference.train import DataParallelTrainer, FailureConfig
    from reference.train.torch import TorchTrainer
    from simcluster import Cluster, NodeSpec

    out: dict[str, float] = {}
    folder = tempfile.mkdtemp(prefix="provider-bench-")  # the temp folder: shared by nodes
    t0 = time.perf_counter()
    cluster = Cluster(nodes=[NodeSpec(cpus=1)] * nodes, provider=provider,
                      preload=reference.PRELOAD)
    out["start"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cluster.close()
    out["close"] = time.perf_counter() - t0

    with Cluster(nodes=[NodeSpec(cpus=1)] * 2, provider=provider,
                 preload=reference.PRELOAD) as cluster:
        reference.init(address=cluster.address)
        try:
            out["noop_first"] = _fit(DataParallelTrainer, noop, folder)
            out["noop"] = statistics.median(_fit(DataParallelTrainer, noop, folder)
                                            for _ in range(fits))
            _fit(TorchTrainer, allreduce, folder)
            out["torch"] = statistics.median(_fit(TorchTrainer, allreduce, folder)
                                             for _ in range(fits))
        finally:
            reference.shutdown()

    with Cluster(nodes=[NodeSpec(cpus=1)] * 3, provider=provider,
                 preload=reference.PRELOAD) as cluster:
        reference.init(address=cluster.address)
        starts = os.path.join(folder, "starts.jsonl")
        Path(starts).touch()
        killed: dict[str, float] = {}

        def kill_rank_1():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                rows = [json.loads(x) for x in Path(starts).read_text().splitlines()]
                if len(rows) >= 2:
                    time.sleep(0.3)  # both ranks are reporting
                    node = next(r["node"] for r in rows if r["rank"] == 1)
                    killed["t"] = time.time()
                    cluster.kill_node(node)
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill_rank_1, daemon=True)
        killer.start()
        try:
            _fit(DataParallelTrainer, restartable, folder,
                 train_loop_config={"starts": starts},
                 run={"failure_config": FailureConfig(max_failures=1)})
        finally:
            reference.shutdown()
        killer.join(5)
        rows = [json.loads(x) for x in Path(starts).read_text().splitlines()]
        again = [r["t"] for r in rows[2:]]
        if "t" not in killed or len(again) != 2:
            raise RuntimeError(f"recovery not observed: starts {rows}, kill {killed}")
        out["recovery"] = max(again) - killed["t"]
    return out


# ---------------------------------------------------------------------------- parent
def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def cell(samples: list[float]) -> str:
    if not samples:
        return "n/a"
    return f"{fmt(statistics.median(samples))} [{fmt(min(samples))}..{fmt(max(samples))}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--providers", default="process,docker")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--fits", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.nodes, args.fits)))
        return 0
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    samples: dict[str, dict[str, list[float]]] = {p: {} for p in providers}
    errors: dict[str, str] = {}
    for r in range(args.rounds):
        for provider in providers if r % 2 == 0 else providers[::-1]:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", provider, "--nodes", str(args.nodes),
                 "--fits", str(args.fits)], capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                errors[provider] = (proc.stderr.strip().splitlines() or ["?"])[-1]
                print(f"round {r + 1} {provider}: failed: {errors[provider]}", file=sys.stderr)
                continue
            for key, value in json.loads(proc.stdout.splitlines()[-1]).items():
                samples[provider].setdefault(key, []).append(value)
            print(f"round {r + 1} {provider}: done", file=sys.stderr)
    load = os.getloadavg()
    print(f"{args.rounds} rounds, each provider in a fresh process per round; "
          f"nproc {os.cpu_count()}, load average now {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}")
    head = f"{'measure':<62}" + "".join(f"{p:>26}" for p in providers)
    ratio = len(providers) == 2
    print(head + (f"{providers[1] + '/' + providers[0]:>18}" if ratio else ""))
    for key, label in MEASURES:
        row = f"{label.format(nodes=args.nodes, fits=args.fits):<62}"
        row += "".join(f"{cell(samples[p].get(key, [])):>26}" for p in providers)
        if ratio and all(samples[p].get(key) for p in providers):
            a, b = (statistics.median(samples[p][key]) for p in providers)
            row += f"{b / a:>17.2f}x"
        print(row)
    for provider, why in errors.items():
        print(f"{provider}: a round failed: {why}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
