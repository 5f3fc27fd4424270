"""Run-snapshot cost benchmark (not a test): what one checkpointed report costs as the run
grows, the reference beside Ray 2.60's checkpoint manager.

    python ci/bench/snapshot_cost.py [--reports 60] [--kept 1,100,1000] [--large-mb 10]
                                     [--large-reports 15] [--dir DIR] [--skip-ray] [--check]

Each case is a fresh run in steady state: `kept` checkpointed reports untimed with
`CheckpointConfig(num_to_keep=kept)` (so every further report evicts one), then `--reports`
timed ones; medians and 90th percentiles per report.

reference: `report()` inside a real 1-worker `fit()`, timed on the rank: the whole round trip
(staging the checkpoint folder, commit, registration with the snapshot rewritten, eviction,
the acknowledgement). It is measured through the public API only, as every ci/ script is, so
its registration alone is not separable here; it is an upper bound of it
(tests/reference/train/_internal/storage/test_snapshot_cost.py times the registration).

Ray: `CheckpointManager.register_checkpoint` (ray/train/v2/_internal/execution/checkpoint/
checkpoint_manager.py) driven directly in this process, built on Ray's own StorageContext and
fed `_TrainingReport`s: no cluster is needed, only a running asyncio loop (it notifies waiters
with `asyncio.create_task`). This is the registration alone; a real Ray report adds the
controller's poll interval (`RAY_TRAIN_HEALTH_CHECK_INTERVAL_S`, 2 s by default) and the
upload, so a Ray `fit()` with 1000 checkpoints per case would take far too long here.

Cases: small metrics (three numbers) for each of `--kept`, in report order and, for the
largest, `scored` (`checkpoint_score_attribute`); then large metrics: `--large-reports`
reports of about `--large-mb` MB each (a list of floats), `num_to_keep=None`, so every report
rewrites every earlier report's metrics.

`--check` exits 1 unless the reference's median report with the largest kept is at most twice
its median with kept=1 (small metrics, report order).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BOUND = 2.0


class Config:
    def __init__(self, num_to_keep, score=None):
        self.num_to_keep = num_to_keep
        self.checkpoint_score_attribute = score
        self.checkpoint_score_order = "min"


def small_metrics(i: int) -> dict:
    return {"step": i, "loss": 1.0 / (i + 1), "acc": random.random()}


def large_metrics(i: int, megabytes: float) -> dict:
    count = int(megabytes * 1e6 / 20)  # a float's repr and its comma are about 20 bytes
    return {"step": i, "loss": 1.0 / (i + 1), "values": [random.random() for _ in range(count)]}


def make_folder(path: str) -> None:
    os.makedirs(path)
    with open(os.path.join(path, "w"), "wb") as f:
        f.write(b"x" * 64)


# ----- the reference: report() inside fit(), timed on the rank -------------------------------


def reference_reports(base: str, label: str, config: Config, prefill: int, timed: int,
                      large_mb: float | None):
    """Seconds per timed report() and the snapshot's size (bytes) at the end."""
    import reference.train as t

    def train():
        import tempfile as tf
        import time as tm

        folder = tf.mkdtemp()
        with open(os.path.join(folder, "w"), "wb") as f:
            f.write(b"x" * 64)
        times = []
        for i in range(prefill + timed):
            metrics = large_metrics(i, large_mb) if large_mb else small_metrics(i)
            start = tm.perf_counter()
            t.report(metrics, checkpoint=t.Checkpoint.from_directory(folder))
            if i >= prefill:
                times.append(tm.perf_counter() - start)
        return times

    run_config = t.RunConfig(storage_path=base, name=label.replace(" ", "").replace(",", "-"),
                             checkpoint_config=t.CheckpointConfig(
                                 num_to_keep=config.num_to_keep,
                                 checkpoint_score_attribute=config.checkpoint_score_attribute,
                                 checkpoint_score_order=config.checkpoint_score_order))
    result = t.DataParallelTrainer(train, scaling_config=t.ScalingConfig(num_workers=1),
                                   run_config=run_config).fit()
    size = os.path.getsize(os.path.join(result.path, "checkpoint_manager_snapshot.json"))
    shutil.rmtree(result.path, ignore_errors=True)
    return result.return_value, size


# ----- Ray: its CheckpointManager driven directly -------------------------------------------


class Ray:
    name = "ray"

    def __init__(self, root: str, config: Config):
        from ray.train import CheckpointConfig
        from ray.train.v2._internal.execution.checkpoint.checkpoint_manager import (
            CheckpointManager,
        )
        from ray.train.v2._internal.execution.context import StorageContext

        self.storage = StorageContext(storage_path=root, experiment_dir_name="run")
        self.manager = CheckpointManager(
            checkpoint_config=CheckpointConfig(
                num_to_keep=config.num_to_keep,
                checkpoint_score_attribute=config.checkpoint_score_attribute,
                checkpoint_score_order=config.checkpoint_score_order,
            ),
            storage_context=self.storage,
        )

    def path(self, dir_name: str) -> str:
        return self.storage.build_checkpoint_path_from_name(dir_name)

    def register(self, path: str, metrics: dict) -> None:
        from ray.train import Checkpoint
        from ray.train.v2._internal.execution.training_report import _TrainingReport

        checkpoint = Checkpoint(path, filesystem=self.storage.storage_filesystem)
        self.manager.register_checkpoint(_TrainingReport(checkpoint, metrics, False))

    @property
    def snapshot_path(self) -> str:
        return self.storage.checkpoint_manager_snapshot_path


# ----- measuring Ray ---------------------------------------------------------------------------


def ray_registrations(base: str, config: Config, prefill: int, timed: int,
                      large_mb: float | None):
    """Seconds per timed registration and the snapshot's size (bytes) at the end."""

    async def in_loop():
        root = tempfile.mkdtemp(dir=base)
        try:
            impl = Ray(root, config)
            times = []
            for i in range(prefill + timed):
                path = impl.path(f"c{i:06d}")
                make_folder(path)
                metrics = large_metrics(i, large_mb) if large_mb else small_metrics(i)
                start = time.perf_counter()
                impl.register(path, metrics)
                if i >= prefill:
                    times.append(time.perf_counter() - start)
            return times, os.path.getsize(impl.snapshot_path)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    return asyncio.run(in_loop())


def fmt_pair(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{fmt_s(statistics.median(ordered))} / {fmt_s(p90)}"


def fmt_s(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reports", type=int, default=60, help="timed reports per case")
    p.add_argument("--kept", default="1,100,1000", help="num_to_keep values, comma separated")
    p.add_argument("--large-mb", type=float, default=10.0)
    p.add_argument("--large-reports", type=int, default=15)
    p.add_argument("--dir", default=None, help="where run folders are made (default: temp dir)")
    p.add_argument("--skip-ray", action="store_true")
    p.add_argument("--check", action="store_true",
                   help=f"exit 1 unless reference kept=max costs at most {BOUND:g}x kept=1")
    args = p.parse_args(argv)
    kept = [int(k) for k in args.kept.split(",")]
    with_ray = not args.skip_ray
    if with_ray:
        try:
            import ray.train  # noqa: F401
        except ImportError:
            with_ray = False
            print("ray is not installed: only the reference is measured "
                  "(pip install -e '.[ray]' for the comparison)")
    import reference

    random.seed(0)
    base = tempfile.mkdtemp(prefix="snapshot-cost-", dir=args.dir)
    reference.init(num_cpus=2)
    print(f"{args.reports} timed reports per case after `kept` untimed ones, under {base}; "
          "median / p90 per report; snapshot size at the end")
    print(f"{'case':<20}{'reference report()':>24}{'Ray registration':>24}{'snapshot':>11}"
          f"{'ref/Ray':>9}")
    medians: dict[str, float] = {}
    try:
        cases = [(f"kept={k}", Config(k), k) for k in kept]
        cases += [(f"kept={k}, scored", Config(k, "loss"), k) for k in kept if k == max(kept)]
        for label, config, k in cases:
            times, size = reference_reports(base, label, config, k, args.reports, None)
            medians[label] = statistics.median(times)
            row = f"{label:<20}{fmt_pair(times):>24}"
            if with_ray:
                ray_times, _ = ray_registrations(base, config, k, args.reports, None)
                row += f"{fmt_pair(ray_times):>24}{fmt_bytes(size):>11}"
                row += f"{medians[label] / statistics.median(ray_times):>8.2f}x"
            else:
                row += f"{'-':>24}{fmt_bytes(size):>11}"
            print(row, flush=True)

        print(f"\nlarge metrics: {args.large_reports} reports of ~{args.large_mb:g} MB of "
              "metrics each, num_to_keep=None (each report rewrites all earlier metrics)")
        print(f"{'impl':<20}{'1st report':>12}{'last report':>13}{'median':>12}{'snapshot':>11}")
        rows = [("reference report()", reference_reports(
            base, "large", Config(None), 0, args.large_reports, args.large_mb))]
        if with_ray:
            rows.append(("Ray registration", ray_registrations(
                base, Config(None), 0, args.large_reports, args.large_mb)))
        for name, (times, size) in rows:
            print(f"{name:<20}{fmt_s(times[0]):>12}{fmt_s(times[-1]):>13}"
                  f"{fmt_s(statistics.median(times)):>12}{fmt_bytes(size):>11}", flush=True)
    finally:
        reference.shutdown()
        shutil.rmtree(base, ignore_errors=True)

    ratio = medians[f"kept={max(kept)}"] / medians["kept=1"]
    verdict = "holds" if ratio <= BOUND else "DOES NOT HOLD"
    print(f"\nbound: reference report() with kept={max(kept)} / kept=1 = {ratio:.2f}x "
          f"(at most {BOUND:g}x required): {verdict}")
    return 1 if args.check and ratio > BOUND else 0


if __name__ == "__main__":
    sys.exit(main())
