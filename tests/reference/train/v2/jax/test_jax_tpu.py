"""JaxTrainer on simulated TPU slices (simcluster.tpu_slice): whole slices reserved at once,
the TPU environment of every host, multislice variables, a lost host failing over to another
slice. JAX computes on the CPU there (no libtpu), through the TPU path's setup."""

from __future__ import annotations

import os

import numpy as np
import pytest

import reference
import reference.train as train
import reference.train.v2.jax
import simcluster
from reference.train.v2.jax import JaxTrainer

pytest.importorskip("jax")
pytestmark = pytest.mark.slow
ENV = ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY",
       "TPU_WORKER_HOSTNAMES", "TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_HOST_BOUNDS",
       "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID",
       "MEGASCALE_PORT", "JAX_PLATFORMS")


def gather_env(config):
    import jax
    from jax.experimental import multihost_utils

    rank = train.get_context().get_world_rank()
    total = multihost_utils.process_allgather(np.array([rank + 1.0])).sum()
    mine = {k: os.environ.get(k) for k in ENV}
    mine.update(rank=rank, processes=jax.process_count(), total=float(total))
    with open(os.path.join(config["folder"], f"rank{rank}-{config['attempt_file']}"), "a") as f:
        f.write(repr(mine) + "\n")
    if mine["TPU_NAME"] == config.get("hold_on"):
        import time

        open(os.path.join(config["folder"], f"holding{rank}"), "w").close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.05)  # until the test kills a host of this slice (the group then stops)
    return mine


def seen(folder, world: int) -> list[dict]:
    import ast

    return [ast.literal_eval((folder / f"rank{r}-env").read_text().splitlines()[-1])
            for r in range(world)]


@pytest.fixture
def slices():
    """A cluster of the given slices (name, accelerator_type, topology), the reference
    connected to it."""
    made = []

    def make(*wanted):
        nodes = [spec for name, kind, topology in wanted
                 for spec in simcluster.tpu_slice(name, kind, topology, cpus=1)]
        reference.shutdown()
        cluster = simcluster.Cluster(nodes=nodes, preload=reference.PRELOAD)
        cluster.__enter__()
        made.append(cluster)
        reference.init(address=cluster.address)
        return cluster

    yield make
    reference.shutdown()
    for cluster in made:
        cluster.close()


def fit(tmp_path, workers, topology, kind="TPU-V4", **config):
    return JaxTrainer(
        gather_env, train_loop_config={"folder": str(tmp_path), "attempt_file": "env", **config},
        scaling_config=train.ScalingConfig(num_workers=workers, use_tpu=True, topology=topology,
                                           accelerator_type=kind),
        run_config=train.RunConfig(storage_path=str(tmp_path / "runs"),
                                   failure_config=train.FailureConfig(max_failures=1))).fit()


def test_a_v4_32_slice_gives_every_host_rays_environment(slices, tmp_path):
    slices(("slice-a", "TPU-V4", "2x2x4"))  # 16 chips: 4 hosts of 4
    fit(tmp_path, 4, "2x2x4")
    ranks = seen(tmp_path, 4)
    hostnames = ",".join(f"slice-a-w-{i}" for i in range(4))
    for rank, env in enumerate(ranks):
        assert env["TPU_NAME"] == "slice-a" and env["TPU_WORKER_ID"] == str(rank)
        assert (env["TPU_ACCELERATOR_TYPE"], env["TPU_TOPOLOGY"]) == ("v4-32", "2x2x4")
        assert env["TPU_WORKER_HOSTNAMES"] == hostnames
        assert env["TPU_VISIBLE_CHIPS"] is None  # a worker holding its host's every chip
        assert env["MEGASCALE_NUM_SLICES"] is None  # one slice: no multislice variables
        assert (env["processes"], env["total"]) == (4, 10.0)  # one JAX program, 4 processes
        assert env["JAX_PLATFORMS"] == "cpu"  # simulated chips: the CPU stands in


def test_two_slices_get_the_multislice_variables(slices, tmp_path):
    slices(("a", "TPU-V4", "2x2x2"), ("b", "TPU-V4", "2x2x2"))  # 8 chips: 2 hosts each
    fit(tmp_path, 4, "2x2x2")
    ranks = seen(tmp_path, 4)
    assert [e["TPU_NAME"] for e in ranks] == ["a", "a", "b", "b"]
    assert [e["MEGASCALE_SLICE_ID"] for e in ranks] == ["0", "0", "1", "1"]
    assert {e["MEGASCALE_NUM_SLICES"] for e in ranks} == {"2"}
    assert {e["MEGASCALE_PORT"] for e in ranks} == {"8081"}
    assert len({e["MEGASCALE_COORDINATOR_ADDRESS"] for e in ranks}) == 1
    assert ranks[0]["total"] == 10.0


def test_a_lost_host_fails_its_slice_and_the_job_moves_to_a_whole_one(slices, tmp_path,
                                                                      monkeypatch):
    import threading
    import time

    # The surviving host's jax.distributed.shutdown() waits for the lost one until the
    # backend's deadline (Ray's variable, 30 s by default) before the group is stopped.
    monkeypatch.setenv("JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S", "2")
    cluster = slices(("a", "TPU-V4", "2x2x2"), ("b", "TPU-V4", "2x2x2"))
    outcome = {}
    # the job takes the first free slice, "a", and holds there until a host of it is lost
    thread = threading.Thread(target=lambda: outcome.update(
        result=fit(tmp_path, 2, "2x2x2", hold_on="a")), daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"holding{r}").exists() for r in range(2)):
        assert time.monotonic() < deadline, "the first group never started"
        time.sleep(0.05)  # poll with a deadline
    assert [e["TPU_NAME"] for e in seen(tmp_path, 2)] == ["a", "a"]
    victim = next(n for n in cluster.nodes if n.spec.labels["ray.io/tpu-slice-name"] == "a"
                  and n.spec.labels["ray.io/tpu-worker-id"] == "1")
    cluster.kill_node(victim.id)
    thread.join(timeout=180)
    assert not thread.is_alive() and "result" in outcome
    after = seen(tmp_path, 2)  # host 0 of "a" is up, but "a" is not whole: "b" is used
    assert [(e["TPU_NAME"], e["TPU_WORKER_ID"]) for e in after] == [("b", "0"), ("b", "1")]


def grow_until(config):
    import time

    context = train.get_context()
    with open(os.path.join(config["folder"], f"world{context.get_world_rank()}"), "a") as f:
        f.write(f"{context.get_world_size()} {os.environ.get('TPU_NAME')}\n")
    if context.get_world_size() < 4:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.05)  # until the controller resizes the group
    return context.get_world_size()


def test_elastic_tpu_jobs_grow_by_whole_slices(slices, tmp_path):
    import threading
    import time

    cluster = slices(("a", "TPU-V4", "2x2x2"))
    trainer = JaxTrainer(
        grow_until, train_loop_config={"folder": str(tmp_path)},
        jax_config=reference.train.v2.jax.JaxConfig(),
        scaling_config=train.ScalingConfig(num_workers=(2, 4), use_tpu=True, topology="2x2x2",
                                           accelerator_type="TPU-V4",
                                           elastic_resize_monitor_interval_s=0.3),
        run_config=train.RunConfig(storage_path=str(tmp_path / "runs")))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(result=trainer.fit()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not (tmp_path / "world1").exists():
        assert time.monotonic() < deadline, "the first group never started"
        time.sleep(0.05)  # poll with a deadline
    first, second = simcluster.tpu_slice("b", "TPU-V4", "2x2x2", cpus=1)
    cluster.add_node(first)
    time.sleep(1.5)  # five monitor intervals with half a slice more: no resize may happen
    assert (tmp_path / "world0").read_text() == "2 a\n"
    cluster.add_node(second)
    thread.join(timeout=120)
    assert not thread.is_alive() and outcome["result"].return_value == 4
    lines = (tmp_path / "world0").read_text().splitlines()
    assert lines == ["2 a", "4 a"]
    assert (tmp_path / "world2").read_text() == "4 b\n"
