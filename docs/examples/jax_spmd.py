"""JaxTrainer: one SPMD training program over several workers, Ray 2.60's JAX guide.

    python docs/examples/jax_spmd.py [--impl reference|ray] [--workers 2] [--steps 60]
    python docs/examples/jax_spmd.py --tpu      # the TPU form, on simulated v4-16 slices

What it shows:
- the training logic wrapped in a function given to `JaxTrainer`, `print` replaced by
  `train.report({"loss": ..., "step": ...})`, the final metrics in `result.metrics`;
- one JAX program across the workers: the batch is a global array sharded over a mesh of
  every process's devices, so `jax.jit` of the loss computes the mean over all workers'
  rows and its gradient is averaged across them (XLA inserts the all-reduce);
- the CPU form Ray runs too: `JaxConfig(use_gpu=True)` with `JAX_PLATFORMS=cpu` in the
  workers' environment (on GPU workers: drop the variable and use
  `ScalingConfig(use_gpu=True)`);
- `--tpu` (reference only): `ScalingConfig(use_tpu=True, topology="2x2x2",
  accelerator_type="TPU-V4")` on two simulated slices (`simcluster.tpu_slice`): 4 workers
  on whole slices, the multislice variables set, JAX computing on the CPU.

The data are synthetic (a linear model y = x . w_true), so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import numpy as np

FEATURES = 16


def train_func(config: dict) -> None:
    import jax
    import jax.numpy as jnp

    train = importlib.import_module(config["impl"] + ".train")
    rank = train.get_context().get_world_rank()
    rng = np.random.default_rng(rank)  # each worker's own rows
    w_true = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("workers",))
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("workers"))

    def global_batch():
        x = rng.normal(size=(config["batch"], FEATURES)).astype(np.float32)
        y = x @ w_true + rng.normal(scale=0.01, size=config["batch"]).astype(np.float32)
        return (jax.make_array_from_process_local_data(rows, x),
                jax.make_array_from_process_local_data(rows, y))

    @jax.jit
    def step(w, x, y):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * grad, loss

    w = jnp.zeros(FEATURES)
    for i in range(config["steps"]):
        w, loss = step(w, *global_batch())
        if (i + 1) % 20 == 0 or i + 1 == config["steps"]:
            error = float(jnp.max(jnp.abs(w - w_true)))
            with tempfile.TemporaryDirectory() as folder:
                np.save(os.path.join(folder, "w.npy"), np.asarray(w))
                train.report({"step": i + 1, "loss": float(loss), "max_error": error,
                              "processes": jax.process_count(),
                              "slices": os.environ.get("MEGASCALE_NUM_SLICES", "1")},
                             checkpoint=train.Checkpoint.from_directory(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--tpu", action="store_true",
                        help="the TPU form on simulated slices (reference only)")
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    jaxtrain = importlib.import_module(args.impl + ".train.v2.jax")
    config = {"impl": args.impl, "steps": args.steps, "batch": args.batch}

    with tempfile.TemporaryDirectory() as scratch:
        run_config = train.RunConfig(name="jax-spmd", storage_path=os.path.join(scratch, "runs"),
                                     worker_runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu"}})
        if args.tpu:
            if args.impl != "reference":
                raise SystemExit("--tpu runs on simulated TPU slices: --impl reference only")
            import reference
            import simcluster

            nodes = [spec for name in ("a", "b")
                     for spec in simcluster.tpu_slice(name, "TPU-V4", "2x2x2", cpus=1)]
            with simcluster.Cluster(nodes=nodes, preload=reference.PRELOAD) as cluster:
                reference.init(address=cluster.address)
                result = jaxtrain.JaxTrainer(
                    train_func, train_loop_config=config,
                    scaling_config=train.ScalingConfig(num_workers=4, use_tpu=True,
                                                       topology="2x2x2",
                                                       accelerator_type="TPU-V4"),
                    run_config=train.RunConfig(name="jax-spmd-tpu",
                                               storage_path=os.path.join(scratch, "runs"))).fit()
                reference.shutdown()
        else:
            result = jaxtrain.JaxTrainer(
                train_func, train_loop_config=config, jax_config=jaxtrain.JaxConfig(use_gpu=True),
                scaling_config=train.ScalingConfig(num_workers=args.workers),
                run_config=run_config).fit()
        print(f"final metrics: {result.metrics}")


if __name__ == "__main__":
    main()
