"""Streaming holds a bounded number of blocks: two workers iterate a 2 GB parquet dataset
(generated in the test's folder) and each one's resident memory stays far below its 1 GB
half. Resident memory is sampled with psutil while iterating, from the training function's
start (the worker's baseline: interpreter, torch, pyarrow) to its end."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import reference.data as rd
import reference.train as train
from reference.train.torch import TorchTrainer

pytestmark = pytest.mark.slow
psutil = pytest.importorskip("psutil")

DATA_BYTES = 2 << 30
COLUMNS = 20  # float32
ROW_GROUP_ROWS = 1 << 17  # 10 MiB per row group
FILES = 16
#: what a worker's resident memory may grow by while it streams its 1 GiB half
GROWTH_BOUND = 320 << 20


def write_dataset(folder) -> int:
    rows = DATA_BYTES // (4 * COLUMNS)
    per_file = rows // FILES
    names = [f"f{i}" for i in range(COLUMNS)]
    # One random row group, written again and again: uncompressed and without dictionaries,
    # every copy takes its full size on disk and in memory once read, as new data would.
    block = np.random.default_rng(0).random((ROW_GROUP_ROWS, COLUMNS), dtype=np.float32)
    group = pa.table(dict(zip(names, block.T, strict=True)))
    for f in range(FILES):
        with pq.ParquetWriter(folder / f"part-{f:02d}.parquet", group.schema,
                              compression="none", use_dictionary=False) as writer:
            for start in range(0, per_file, ROW_GROUP_ROWS):
                writer.write_table(group.slice(0, min(ROW_GROUP_ROWS, per_file - start)))
    return per_file * FILES


def stream(config):
    process = psutil.Process()
    start = peak = process.memory_info().rss
    rows = 0
    for i, batch in enumerate(train.get_dataset_shard("train").iter_torch_batches(
            batch_size=1024)):
        rows += len(batch["f0"])
        if i % 64 == 0:
            peak = max(peak, process.memory_info().rss)
    peak = max(peak, process.memory_info().rss)
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["folder"], f"rank{rank}.json"), "w") as f:
        json.dump({"rows": rows, "start": start, "peak": peak}, f)


def test_two_workers_stream_a_2gb_dataset_in_bounded_memory(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    total = write_dataset(data)
    on_disk = sum(p.stat().st_size for p in data.iterdir())
    assert on_disk >= 0.95 * DATA_BYTES
    TorchTrainer(stream, train_loop_config={"folder": str(tmp_path)},
                 scaling_config=train.ScalingConfig(num_workers=2),
                 datasets={"train": rd.read_parquet(str(data))},
                 run_config=train.RunConfig(storage_path=str(tmp_path / "runs"))).fit()
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [s["rows"] for s in seen] == [total // 2] * 2
    for rank, s in enumerate(seen):
        growth = s["peak"] - s["start"]
        print(f"rank {rank}: baseline {s['start'] >> 20} MiB, peak {s['peak'] >> 20} MiB, "
              f"growth {growth >> 20} MiB while streaming {on_disk // 2 >> 20} MiB")
        assert growth < GROWTH_BOUND, (
            f"rank {rank}'s resident memory grew by {growth >> 20} MiB while streaming its "
            f"{on_disk // 2 >> 20} MiB half (bound {GROWTH_BOUND >> 20} MiB)")
