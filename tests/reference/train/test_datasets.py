"""`datasets=` on distributed fits: per-rank shards, epochs, the rank-0 barrier, restarts.

Each rank journals what it read into a file of the test's folder; the checks read them."""

from __future__ import annotations

import json
import os
import time

import pytest

import reference.data as rd
import reference.train as train
from reference.train.torch import TorchTrainer

pytestmark = pytest.mark.slow


def journal(folder: str, entry: dict) -> None:
    rank = train.get_context().get_world_rank()
    with open(os.path.join(folder, f"rank{rank}.jsonl"), "a") as f:
        f.write(json.dumps(entry) + "\n")


def read_journal(folder: str, rank: int) -> list[dict]:
    with open(os.path.join(folder, f"rank{rank}.jsonl")) as f:
        return [json.loads(line) for line in f]


def fit(fn, tmp_path, workers=2, failures=0, **kwargs):
    trainer = TorchTrainer(
        fn, train_loop_config={"folder": str(tmp_path)},
        scaling_config=train.ScalingConfig(num_workers=workers),
        run_config=train.RunConfig(storage_path=str(tmp_path / "runs"),
                                   failure_config=train.FailureConfig(max_failures=failures)),
        **kwargs)
    return trainer.fit()


def read_two_epochs(config):
    shard = train.get_dataset_shard("train")
    epochs = [[int(i) for b in shard.iter_torch_batches(batch_size=4) for i in b["id"]]
              for _ in range(2)]
    full = [r["id"] for r in train.get_dataset_shard("val").iter_rows()]
    journal(config["folder"], {"epochs": epochs, "val": full})


def test_split_datasets_give_disjoint_equal_shards_every_epoch(tmp_path):
    fit(read_two_epochs, tmp_path,
        datasets={"train": rd.range(21, override_num_blocks=5), "val": rd.range(5)},
        dataset_config=train.DataConfig(datasets_to_split=["train"]))
    seen = [read_journal(tmp_path, r)[0] for r in range(2)]
    shards = [s["epochs"][0] for s in seen]
    assert [len(s) for s in shards] == [10, 10]  # floor(21 / 2), one row dropped
    assert not set(shards[0]) & set(shards[1])
    for s in seen:
        assert s["epochs"][1] == s["epochs"][0]  # a second epoch reads the shard again
        assert s["val"] == list(range(5))  # not split: every rank reads all of it


def unknown_name(config):
    train.get_dataset_shard("nope")


def test_an_unknown_name_is_a_key_error_naming_it(tmp_path):
    with pytest.raises(train.WorkerGroupError) as info:
        fit(unknown_name, tmp_path, datasets={"train": rd.range(4)})
    errors = list(info.value.worker_failures.values())
    assert isinstance(errors[0], KeyError)
    assert "Dataset shard for 'nope' not found" in str(errors[0])


def barrier(config):
    rank = train.get_context().get_world_rank()
    if rank == 0:
        time.sleep(1.0)
        journal(config["folder"], {"called": time.time()})
        train.get_dataset_shard("train")
    else:
        train.get_dataset_shard("train")
        journal(config["folder"], {"returned": time.time()})
    train.get_dataset_shard("train")  # a second call does not wait again


def test_other_ranks_get_their_shard_only_after_rank_0_asked(tmp_path):
    fit(barrier, tmp_path, datasets={"train": rd.range(4)})
    called = read_journal(tmp_path, 0)[0]["called"]
    returned = read_journal(tmp_path, 1)[0]["returned"]
    assert returned >= called


def fail_once(config):
    ids = [r["id"] for r in train.get_dataset_shard("train").iter_rows()]
    journal(config["folder"], {"ids": ids, "world": train.get_context().get_world_size()})
    marker = os.path.join(config["folder"], "failed")
    if train.get_context().get_world_rank() == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("attempt 0 fails after reading")


def test_a_restart_makes_the_shards_anew_from_a_callable(tmp_path):
    calls = tmp_path / "made"

    def make():
        with open(calls, "a") as f:
            f.write("x")
        return rd.range(9).filter(lambda r: r["id"] != 4)

    fit(fail_once, tmp_path, failures=1, datasets={"train": make})
    assert calls.read_text() == "xx"  # resolved at each worker-group start
    attempts = [[e["ids"] for e in read_journal(tmp_path, r)] for r in range(2)]
    assert [len(a) for a in attempts] == [2, 2]
    for attempt in range(2):
        first, second = attempts[0][attempt], attempts[1][attempt]
        assert len(first) == len(second) == 4 and not set(first) & set(second)
        assert 4 not in first + second


def local(config):
    ds = train.get_dataset_shard("train")
    return ds.count(), type(ds).__name__


def test_local_mode_gives_the_whole_dataset(tmp_path):
    result = TorchTrainer(local, scaling_config=train.ScalingConfig(num_workers=0),
                          datasets={"train": rd.range(7)}).fit()
    assert result.return_value == (7, "Dataset")


def read_until_resized(config):
    ctx = train.get_context()
    ids = [r["id"] for r in train.get_dataset_shard("train").iter_rows()]
    journal(config["folder"], {"ids": ids, "world": ctx.get_world_size()})
    marker = os.path.join(config["folder"], "grow")
    if ctx.get_world_size() == 1:
        open(marker, "w").close()  # the test adds a node now
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.1)  # the controller stops this group when it resizes
    return ctx.get_world_size()


def test_an_elastic_resize_splits_the_dataset_for_the_new_size(tmp_path):
    import reference
    import simcluster

    reference.shutdown()
    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=1)],
                            preload=reference.PRELOAD) as cluster:
        reference.init(address=cluster.address)
        try:
            trainer = train.DataParallelTrainer(
                read_until_resized, train_loop_config={"folder": str(tmp_path)},
                scaling_config=train.ScalingConfig(num_workers=(1, 2),
                                                   elastic_resize_monitor_interval_s=0.5),
                datasets={"train": rd.range(10)},
                run_config=train.RunConfig(storage_path=str(tmp_path / "runs")))
            handle = _in_thread(trainer.fit)
            deadline = time.monotonic() + 60
            while not (tmp_path / "grow").exists():
                assert time.monotonic() < deadline, "the first group never read its shard"
                time.sleep(0.05)  # poll with a deadline
            cluster.add_node(simcluster.NodeSpec(cpus=1))
            result = handle()
        finally:
            reference.shutdown()
    assert result.return_value == 2
    first = read_journal(tmp_path, 0)
    assert first[0] == {"ids": list(range(10)), "world": 1}
    after = [first[-1]["ids"], read_journal(tmp_path, 1)[-1]["ids"]]
    assert [len(a) for a in after] == [5, 5] and sorted(after[0] + after[1]) == list(range(10))


def _in_thread(fn):
    """Run fn in a thread; the returned callable joins it (120 s) and gives its value."""
    import threading

    box = {}
    thread = threading.Thread(target=lambda: box.update(value=fn()), daemon=True)
    thread.start()

    def join():
        thread.join(timeout=120)
        assert not thread.is_alive(), "fit() did not return"
        return box["value"]

    return join
