"""Data ingest benchmark (not a test): training workers reading a parquet dataset.

A bare pyarrow scan (the limit), Ray Data 2.60 and the reference's data layer, side by side.

    python ci/bench/data_ingest.py [--gb 1.0] [--workers 2] [--batch-size 1024]
        [--rounds 1] [--sides limit,ray,reference] [--cpus N] [--keep DIR] [--json OUT]

A parquet dataset of 20 float32 columns (`--gb` GiB in memory, 80 bytes a row) is written
to a temp folder in files of about 64 MiB (a multiple of `--workers` files, 8 row groups
each, snappy, no dictionary encoding: random floats do not compress) and read by every side
of the run; it is deleted at the end, unless `--keep DIR`, where part-*.parquet files already
there are reused as they are (`--gb` is then ignored):

  limit:     `--workers` processes, each scanning files[rank::workers] with
             `pyarrow.dataset`, re-chunking the record batches to `--batch-size` rows
             (slices where they fit, one concatenation across a batch boundary) and turning
             each into a dict of torch tensors (`torch.from_numpy` of every column);
  ray:       `ray.train.torch.TorchTrainer` with `datasets={"train":
             ray.data.read_parquet(path)}`, each worker draining
             `get_dataset_shard("train").iter_torch_batches(batch_size=...)`
             (`ray.init(address="local", num_cpus=--cpus)`,
             RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=0.1);
  reference: the same training function with `reference` as its root module
             (`reference.init(num_cpus=--cpus, preload=...)`); skipped with a note while
             `reference.data` does not import.

Every measurement runs in a fresh process. A worker times itself from its first call of the
iteration to the last batch and counts the rows; rows/s = all rows / the slowest worker's
time. Peak RSS is each worker process's high-water mark (VmHWM), the max over workers;
Ray Data's read tasks run in other processes and are not in Ray's figure, the limit's
processes do all their reading themselves. Beside it, the whole `fit()` wall time.
`--rounds` repeats each side (orders alternate) and shows the median. The target for the
reference: >= 0.8x the limit and ahead of Ray.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import framework_bench as fb  # noqa: E402

SIDES = ("limit", "ray", "reference")
COLUMNS, ROW_BYTES, FILE_BYTES, ROW_GROUPS = 20, 20 * 4, 64 << 20, 8
TARGET = 0.8
PRELOAD = (*fb.TORCH_PRELOAD, "pyarrow.dataset", "pyarrow.parquet", "reference.data")


# ------------------------------------------------------------------ what workers run
def peak_rss_mib(field: str = "VmHWM") -> float:
    """This process's peak (or, with "VmRSS", current) resident set size in MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def drain(make_batches) -> dict:
    """Consume every batch of make_batches(): rows, batches, seconds from the first
    call, RSS."""
    rss_start = peak_rss_mib("VmRSS")
    start, rows, sizes = time.perf_counter(), 0, []
    for batch in make_batches():
        sizes.append(len(next(iter(batch.values()))))
        rows += sizes[-1]
    return {"rows": rows, "seconds": time.perf_counter() - start, "batches": len(sizes),
            "max_batch": max(sizes, default=0), "rss_start_mib": rss_start,
            "peak_rss_mib": peak_rss_mib()}


def train_fn(config: dict) -> None:
    """The training function of the ray and reference sides; config["root"] names the
    implementation ("ray" or "reference") whose `train` module it uses."""
    train = importlib.import_module(config["root"] + ".train")
    shard = train.get_dataset_shard("train")
    rank = train.get_context().get_world_rank()
    out = drain(lambda: shard.iter_torch_batches(batch_size=config["batch_size"]))
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump(out, f)


def limit_batches(files: list[str], size: int):
    """A bare pyarrow scan of `files` in batches of `size` rows, as dicts of tensors."""
    import warnings

    import pyarrow as pa
    import pyarrow.dataset as pds
    import torch

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

    def tensors(rb):
        return {n: torch.from_numpy(c.to_numpy()) for n, c in zip(rb.schema.names, rb.columns, strict=True)}

    carry = None
    for rb in pds.dataset(files, format="parquet").to_batches():
        if carry is not None:
            need = size - carry.num_rows
            carry, rb = pa.concat_batches([carry, rb.slice(0, need)]), rb.slice(need)
            if carry.num_rows < size:
                continue
            yield tensors(carry)
            carry = None
        full = rb.num_rows - rb.num_rows % size
        for offset in range(0, full, size):
            yield tensors(rb.slice(offset, size))
        if full < rb.num_rows:
            carry = rb.slice(full)
    if carry is not None and carry.num_rows:
        yield tensors(carry)


# ------------------------------------------------------------------ the children
def child(side: str, config: dict) -> dict:
    if side == "limit-worker":
        # Imported before the clock, as the training workers have them loaded.
        import pyarrow.dataset  # noqa: F401
        import torch  # noqa: F401

        return drain(lambda: limit_batches(config["files"], config["batch_size"]))
    if side == "limit":
        files, workers = config["files"], config["workers"]
        with tempfile.TemporaryDirectory() as scratch:
            procs = []
            for rank in range(workers):
                cfg = dict(config, files=files[rank::workers])
                procs.append(subprocess.Popen(
                    [sys.executable, __file__, "--child", "limit-worker", "--config",
                     json.dumps(cfg), "--result", os.path.join(scratch, f"rank{rank}.json")]))
            if any(p.wait() != 0 for p in procs):
                raise RuntimeError("a limit worker failed")
            per_worker = [fb.read_json(os.path.join(scratch, f"rank{r}.json"))
                          for r in range(workers)]
        return {"workers": per_worker}
    start = time.perf_counter()
    if side == "ray":
        os.environ.update(fb.RAY_ENV, RAY_DATA_DISABLE_PROGRESS_BARS="1")
        import ray

        ray.init(address="local", num_cpus=config["cpus"], include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    else:
        import reference

        reference.init(num_cpus=config["cpus"], preload=PRELOAD)
    init_s = time.perf_counter() - start
    try:
        train = importlib.import_module(side + ".train")
        trainer_cls = importlib.import_module(side + ".train.torch").TorchTrainer
        data = importlib.import_module(side + ".data")
        with tempfile.TemporaryDirectory() as scratch:
            read = time.perf_counter()
            dataset = data.read_parquet(config["path"])
            read_s = time.perf_counter() - read
            trainer = trainer_cls(
                train_fn, datasets={"train": dataset},
                train_loop_config={"root": side, "batch_size": config["batch_size"],
                                   "out": scratch},
                scaling_config=train.ScalingConfig(num_workers=config["workers"]),
                run_config=train.RunConfig(storage_path=scratch, name="ingest"))
            called = time.perf_counter()
            trainer.fit()
            fit_wall = time.perf_counter() - called
            per_worker = [fb.read_json(os.path.join(scratch, f"rank{r}.json"))
                          for r in range(config["workers"])]
    finally:
        importlib.import_module(side).shutdown()
    return {"workers": per_worker, "fit_wall": fit_wall, "init_s": init_s, "read_s": read_s}


def measure(side: str, config: dict, timeout: float) -> dict:
    """One run of a side in a fresh process: rows/s, the launch's wall time, peak RSS."""
    with tempfile.TemporaryDirectory() as scratch:
        result = os.path.join(scratch, "result.json")
        cmd = [sys.executable, __file__, "--child", side, "--config", json.dumps(config),
               "--result", result]
        rc, wall, text = fb.run_command(cmd, timeout)
        if rc != 0:
            raise fb.LaunchError(f"{'timed out' if rc is None else f'exit status {rc}'}\n"
                                 f"{text[-3000:]}")
        out = fb.read_json(result)
    rows = sum(w["rows"] for w in out["workers"])
    if rows != config["rows"]:
        raise fb.LaunchError(f"read {rows} rows of {config['rows']}")
    if max(w["max_batch"] for w in out["workers"]) > config["batch_size"]:
        raise fb.LaunchError(f"batches of over {config['batch_size']} rows")
    slowest = max(w["seconds"] for w in out["workers"])
    return {**out, "rows": rows, "rate": rows / slowest, "slowest_s": slowest,
            "fit_wall": out.get("fit_wall"), "launch_wall": wall,
            "peak_rss_mib": max(w["peak_rss_mib"] for w in out["workers"]),
            "rss_start_mib": max(w["rss_start_mib"] for w in out["workers"])}


# ------------------------------------------------------------------ driver
def make_dataset(folder: str, gb: float, workers: int) -> list[str]:
    """~64 MiB parquet files (a multiple of `workers`) of COLUMNS float32 columns;
    the part files already in `folder` when there are any."""
    files = sorted(str(p) for p in Path(folder).glob("part-*.parquet"))
    if files:
        print(f"reusing the {len(files)} files in {folder}", file=sys.stderr)
        return files
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = int(gb * (1 << 30)) // ROW_BYTES
    n_files = workers * max(1, round(rows * ROW_BYTES / FILE_BYTES / workers))
    rng = np.random.default_rng(0)
    for i in range(n_files):
        n = rows // n_files + (i < rows % n_files)
        table = pa.table({f"c{j:02d}": rng.standard_normal(n, dtype=np.float32)
                          for j in range(COLUMNS)})
        path = os.path.join(folder, f"part-{i:05d}.parquet")
        pq.write_table(table, path, row_group_size=-(-n // ROW_GROUPS), use_dictionary=False)
        files.append(path)
    return files


def importable(module: str) -> str | None:
    """None when `import module` works in a fresh interpreter, else the error's last line."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True, cwd=HERE.parents[1], timeout=300)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--gb", type=float, default=1.0, help="dataset GiB (in memory)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=None,
                        help="num_cpus of ray.init / reference.init (default workers + 2: the "
                             "training workers plus CPUs for the read tasks; Ray Data "
                             "hangs with no CPU beyond the workers)")
    parser.add_argument("--keep", metavar="DIR", help="write (or reuse) the dataset here")
    parser.add_argument("--json", metavar="OUT", help="write the results as JSON")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fb.write_json(args.result, child(args.child, json.loads(args.config)))
        return
    sides = [s for s in SIDES if s in args.sides.split(",")]
    fb.setup_environment()
    notes, errors = [], []
    for side, module in (("ray", "ray.data, ray.train.torch"), ("reference", "reference.data")):
        why = importable(module) if side in sides else None
        if why is not None:
            sides.remove(side)
            notes.append(f"{side} skipped: `import {module}` fails ({why})")
            print(notes[-1], file=sys.stderr, flush=True)
    folder = args.keep or tempfile.mkdtemp(prefix="data-ingest-")
    os.makedirs(folder, exist_ok=True)
    try:
        import pyarrow.parquet as pq

        files = make_dataset(folder, args.gb, args.workers)
        meta = [pq.ParquetFile(f).metadata for f in files]
        rows = sum(m.num_rows for m in meta)
        disk_mib = sum(os.path.getsize(f) for f in files) / (1 << 20)
        config = {"path": folder, "files": files, "rows": rows, "workers": args.workers,
                  "batch_size": args.batch_size, "cpus": args.cpus or args.workers + 2}
        runs: dict[str, list[dict]] = {s: [] for s in sides}
        for round_ in range(args.rounds):
            for side in fb.alternate(sides, round_):
                print(f"[{round_ + 1}/{args.rounds}] {side} ...", file=sys.stderr, flush=True)
                run = fb.attempt(errors, side, lambda s=side: measure(s, config, args.timeout))
                if run is not None:
                    runs[side].append(run)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)

    def med(side: str, key: str):
        values = [r[key] for r in runs.get(side, []) if r.get(key) is not None]
        return statistics.median(values) if values else None

    rates = {s: med(s, "rate") for s in sides}
    print(f"\n{len(files)} parquet files, {sum(m.num_row_groups for m in meta)} row groups, "
          f"{rows:,} rows x {COLUMNS} float32 ({rows * ROW_BYTES / (1 << 20):.0f} MiB in "
          f"memory, {disk_mib:.0f} MiB on disk); {args.workers} workers, batch "
          f"{args.batch_size}, num_cpus {config['cpus']}; median of {args.rounds} round(s); "
          f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'side':<11}{'rows/s':>14}{'x of limit':>12}{'slowest s':>11}{'fit wall s':>12}"
          f"{'peak RSS MiB':>14}{'RSS at start':>14}")

    def cell(value, spec: str, width: int) -> str:
        return (format(value, spec) if value is not None else "n/a").rjust(width)

    for side in sides:
        limit, rate = rates.get("limit"), rates[side]
        ratio = rate / limit if rate is not None and limit else None
        print(f"{side:<11}{cell(rate, ',.0f', 14)}{cell(ratio, '.2f', 11)}"
              f"{'x' if ratio is not None else ' '}{cell(med(side, 'slowest_s'), '.2f', 11)}"
              f"{cell(med(side, 'fit_wall'), '.2f', 12)}"
              f"{cell(med(side, 'peak_rss_mib'), '.0f', 14)}"
              f"{cell(med(side, 'rss_start_mib'), '.0f', 14)}")
    ours, limit, ray_rate = rates.get("reference"), rates.get("limit"), rates.get("ray")
    if ours is None or limit is None or ray_rate is None:
        verdict = "n/a (needs the limit, ray and reference sides)"
    else:
        met = ours >= TARGET * limit and ours > ray_rate
        verdict = (f"{'met' if met else 'NOT met'} (reference {ours / limit:.2f}x the limit, "
                   f"Ray {ray_rate / limit:.2f}x)")
    print(f"reference >= {TARGET}x the limit and ahead of Ray: {verdict}")
    for line in notes + [f"failed: {e}" for e in errors]:
        print(line)
    if args.json:
        fb.write_json(args.json, {
            "dataset": {"files": len(files), "rows": rows, "columns": COLUMNS,
                        "disk_mib": disk_mib, "path": folder if args.keep else None},
            "config": {k: v for k, v in config.items() if k != "files"},
            "runs": runs, "median_rows_per_s": rates, "verdict": verdict,
            "notes": notes, "errors": errors})
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
