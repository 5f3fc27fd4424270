"""PyTorch overhead benchmark (not a test): the reference's TorchTrainer against plain
torch.distributed on the same loop.

    python ci/bench/torch_overhead.py [--workers 2] [--steps 300] [--warmup 30] [--rounds 3]

For a small MLP and a small CNN it prints training steps per second of
  plain:     the loop in `--workers` processes started by torchrun (gloo, DDP,
             DistributedSampler, the batches used as they come), and
  reference: the same loop inside `reference.train.torch.TorchTrainer` with
             `prepare_model` / `prepare_data_loader`, on a one-node simcluster,
side by side with the overhead (target: at most 3%). Steps per second are measured inside
the loop, between two barriers after `--warmup` steps, on rank 0; the best and the median
of `--rounds` alternating rounds are shown. The wall time of the whole launch (process start,
rendezvous, the loop, shutdown) is printed beside it for context: it is dominated by
process start, which the two launchers do differently.

Both sides use the same number of torch threads per process (CPUs / workers), set inside
the loop, so the thread defaults of the launchers do not matter.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

WORKLOADS = ("mlp", "cnn")
BATCH = 64


def build(workload: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if workload == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                              nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(4096, 1, 28, 28, generator=g),
                                          torch.randint(0, 10, (4096,), generator=g))
    return model, data


def timed_loop(model, loader, steps: int, warmup: int, threads: int) -> float:
    """Steps per second over `steps` steps after `warmup` steps (all ranks in step)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    done, epoch, start = 0, 0, None
    while done < warmup + steps:
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            if done == warmup:
                dist.barrier()
                start = time.perf_counter()
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            done += 1
            if done == warmup + steps:
                break
        epoch += 1
    dist.barrier()
    return steps / (time.perf_counter() - start)


# ------------------------------------------------------------------------ the two launches
def reference_train_fn(config: dict) -> float:
    from reference.train.torch import prepare_data_loader, prepare_model

    model, data = build(config["workload"])
    model = prepare_model(model)
    loader = prepare_data_loader(torch_loader(data, shuffle=True))
    return timed_loop(model, loader, config["steps"], config["warmup"], config["threads"])


def torch_loader(data, shuffle: bool, sampler=None):
    import torch

    return torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=shuffle and not sampler,
                                       sampler=sampler)


def plain_child(args) -> None:
    """One torchrun process: the loop with torch.distributed and nothing else."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DistributedSampler

    dist.init_process_group("gloo")
    model, data = build(args.workload)
    model = DistributedDataParallel(model)
    loader = torch_loader(data, shuffle=True, sampler=DistributedSampler(data, shuffle=True))
    rate = timed_loop(model, loader, args.steps, args.warmup, args.threads)
    if dist.get_rank() == 0:
        Path(args.result).write_text(json.dumps(rate))
    dist.destroy_process_group()


def run_plain(workload: str, args, threads: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as scratch:
        result = os.path.join(scratch, "rate.json")
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={args.workers}", __file__, "--child",
                   "--workload", workload, "--steps", str(args.steps),
                   "--warmup", str(args.warmup), "--threads", str(threads),
                   "--result", result]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"torchrun failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return json.loads(Path(result).read_text()), wall


def run_reference(workload: str, args, threads: int, storage: str) -> tuple[float, float]:
    import reference.train as train
    from reference.train.torch import TorchTrainer

    config = {"workload": workload, "steps": args.steps, "warmup": args.warmup,
              "threads": threads}
    start = time.perf_counter()
    result = TorchTrainer(
        reference_train_fn, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=args.workers),
        run_config=train.RunConfig(storage_path=storage, name=f"{workload}-{time.time_ns()}"),
    ).fit()
    return result.return_value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        plain_child(args)
        return

    import reference
    import simcluster
    from reference import PRELOAD

    threads = max(1, (os.cpu_count() or 1) // args.workers)
    # Workers fork from node supervisors; importing torch (and what DDP imports on first
    # use) there once keeps process start out of every worker, as a warm pool would.
    preload = (*PRELOAD, "torch", "torch.distributed",
               "torch.distributed._functional_collectives", "reference.train.torch")
    node = simcluster.NodeSpec(cpus=args.workers)
    rows = []
    with simcluster.Cluster(nodes=[node], preload=preload) as cluster, \
            tempfile.TemporaryDirectory() as storage:
        reference.init(address=cluster.address)
        try:
            for workload in WORKLOADS:
                plain, ours = [], []
                for round_ in range(args.rounds):
                    # Alternate the order so a drift in machine load hits both alike.
                    launches = [("plain", lambda w=workload: run_plain(w, args, threads)),
                                ("reference", lambda w=workload: run_reference(
                                    w, args, threads, storage))]
                    for name, launch in launches[::1 if round_ % 2 == 0 else -1]:
                        (plain if name == "plain" else ours).append(launch())
                rows.append((workload, plain, ours))
        finally:
            reference.shutdown()

    print(f"{args.workers} workers, gloo, batch {BATCH} per worker, {args.steps} timed steps "
          f"after {args.warmup}, {threads} torch thread(s) per process, {args.rounds} "
          "alternating rounds; steps/s as best (median)")
    print(f"{'workload':<10}{'plain steps/s':>18}{'reference steps/s':>20}"
          f"{'overhead':>16}{'wall s plain/reference':>25}")
    for workload, plain, ours in rows:
        # On a shared machine other load only ever slows a round down, so the best round
        # is the closest estimate of each side's own speed; the median shows the spread.
        p_best, r_best = max(r for r, _ in plain), max(r for r, _ in ours)
        p_med = statistics.median(r for r, _ in plain)
        r_med = statistics.median(r for r, _ in ours)
        walls = (statistics.median(w for _, w in plain), statistics.median(w for _, w in ours))
        print(f"{workload:<10}{p_best:>9.1f} ({p_med:>5.1f}){r_best:>11.1f} ({r_med:>5.1f})"
              f"{(p_best - r_best) / p_best:>8.1%} ({(p_med - r_med) / p_med:>5.1%})"
              f"{walls[0]:>16.2f} / {walls[1]:.2f}")

if __name__ == "__main__":
    main()
