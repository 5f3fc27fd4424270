"""JaxTrainer.fit() with real multi-process JAX on the CPU: Ray's CPU path (use_gpu=True with
JAX_PLATFORMS=cpu), independent workers without a distributed setup, simulated GPU nodes,
local mode, and a restart after a killed worker resuming from a numpy checkpoint."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import reference.train as train
from reference.train.v2.jax import JaxConfig, JaxTrainer

pytest.importorskip("jax")
pytestmark = pytest.mark.slow
CPU = {"env_vars": {"JAX_PLATFORMS": "cpu"}}


def spmd(config):
    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    rank = train.get_context().get_world_rank()
    local = np.array([float(rank + 1)])
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("workers",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("workers"))
    global_array = jax.make_array_from_process_local_data(sharding, local)
    return {
        "processes": jax.process_count(), "index": jax.process_index(),
        "devices": jax.device_count(), "platform": jax.devices()[0].platform,
        "allgather": multihost_utils.process_allgather(local).ravel().tolist(),
        "jit_sum": float(jax.jit(jnp.sum)(global_array)),
        "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def fit(tmp_path, fn=spmd, **kwargs):
    kwargs.setdefault("scaling_config", train.ScalingConfig(num_workers=2))
    run = kwargs.pop("run", {})
    return JaxTrainer(fn, run_config=train.RunConfig(storage_path=str(tmp_path), **run),
                      **kwargs).fit()


def test_rays_cpu_path_joins_the_workers_in_one_jax_program(tmp_path):
    result = fit(tmp_path, jax_config=JaxConfig(use_gpu=True),
                 run={"worker_runtime_env": CPU})
    seen = result.return_value  # rank 0's
    assert (seen["processes"], seen["index"], seen["devices"]) == (2, 0, 2)
    assert seen["allgather"] == [1.0, 2.0] and seen["jit_sum"] == 3.0
    assert seen["platform"] == "cpu"


def test_without_gpu_or_tpu_every_worker_is_its_own_jax(tmp_path):
    seen = fit(tmp_path).return_value  # JaxConfig() from ScalingConfig(use_gpu=False)
    assert (seen["processes"], seen["devices"], seen["allgather"]) == (1, 1, [1.0])


def test_simulated_gpus_run_the_gpu_path_on_the_cpu_with_each_workers_own_gpu(tmp_path):
    import reference
    import simcluster

    reference.shutdown()
    try:
        with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2, gpus=2)],
                                preload=reference.PRELOAD) as cluster:
            reference.init(address=cluster.address)
            result = fit(tmp_path, fn=_both_ranks,
                         scaling_config=train.ScalingConfig(num_workers=2, use_gpu=True))
    finally:
        reference.shutdown()
    ranks = result.return_value
    assert [r["processes"] for r in ranks] == [2, 2] and ranks[0]["jit_sum"] == 3.0
    # each worker keeps its own GPU (Ray's backend would set "0" on both)
    assert sorted(r["cuda_visible"] for r in ranks) == ["0", "1"]


def _both_ranks(config):
    from jax.experimental import multihost_utils

    mine = spmd(config)
    visible = multihost_utils.process_allgather(np.array([int(mine["cuda_visible"])]))
    return [dict(mine, cuda_visible=str(v)) for v in visible.ravel().tolist()]


def test_local_mode_runs_the_function_in_the_driver():
    result = JaxTrainer(spmd, scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert result.return_value["processes"] == 1


def resumable(config):
    import jax
    import jax.numpy as jnp

    context = train.get_context()
    start, w = 0, jnp.zeros(3)
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            saved = np.load(os.path.join(folder, "params.npz"))
            start, w = int(saved["step"]) + 1, jnp.asarray(saved["w"])
    x = jnp.arange(3.0)
    grad = jax.jit(jax.grad(lambda w: jnp.sum((w - x) ** 2)))
    for step in range(start, 4):
        w = w - 0.25 * grad(w)
        if step == 2 and context.get_world_rank() == 1 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            os._exit(1)  # after the checkpoint of step 1, before step 2's
        with tempfile.TemporaryDirectory() as folder:
            np.savez(os.path.join(folder, "params.npz"), step=step, w=np.asarray(w))
            train.report({"step": step, "start": start, "processes": jax.process_count()},
                         checkpoint=train.Checkpoint.from_directory(folder))


def test_a_killed_worker_restarts_the_group_which_resumes_from_the_checkpoint(tmp_path,
                                                                             monkeypatch):
    # The survivor's jax.distributed.shutdown() waits for the dead peer until the backend's
    # deadline (Ray's variable, 30 s by default) before the group is stopped.
    monkeypatch.setenv("JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S", "2")
    result = fit(tmp_path, fn=resumable, jax_config=JaxConfig(use_gpu=True),
                 train_loop_config={"marker": str(tmp_path / "killed")},
                 run={"worker_runtime_env": CPU,
                      "failure_config": train.FailureConfig(max_failures=1)})
    assert (tmp_path / "killed").exists()
    assert result.metrics == {"step": 3, "start": 2, "processes": 2}
    with result.checkpoint.as_directory() as folder:
        w = np.load(os.path.join(folder, "params.npz"))["w"]
    np.testing.assert_allclose(w, np.arange(3.0) * (1 - 0.5 ** 4), rtol=1e-6)
