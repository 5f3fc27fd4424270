"""JaxConfig and its backend: ``jax.distributed`` across the workers on GPU and TPU.

Ray 2.60's rules, followed here:
- `JaxConfig(use_tpu=False, use_gpu=False)`: no distributed setup; every worker is a
  single-process JAX (its own `jax.process_count() == 1`).
- with `use_tpu` or `use_gpu`: rank 0 gives the coordinator (its node address and a free
  port); every worker then sets `JAX_PLATFORMS` if unset ("tpu" for TPU, else "cuda"), on a
  multislice TPU run also `MEGASCALE_COORDINATOR_ADDRESS` / `_NUM_SLICES` / `_SLICE_ID`
  (always) and `MEGASCALE_PORT` (unless set), and calls
  ``jax.distributed.initialize(coordinator, num_workers, rank)`` (on CUDA with
  `local_device_ids` = the worker's GPU positions). A platform of "cpu" set by the user
  (`RunConfig(worker_runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu"}})`) with
  `use_gpu=True` is Ray's way to a multi-process CPU job: jax's CPU collectives (gloo by
  default in jax >= 0.5) join the processes.
- `on_shutdown`: ``jax.distributed.shutdown()`` on every worker, waiting at most
  `JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S` (30 s); a timeout or an error is only logged.

Where the reference differs, on purpose:
- CUDA_VISIBLE_DEVICES is left as the worker group set it (each worker's own GPUs). Ray's
  backend overwrites it with "0,...,k-1", which on a node with several one-GPU workers names
  the same physical GPU 0 in every worker (catalogue: a Ray bug).
- Simulated GPUs or TPUs (a simcluster node declares devices that this host's jax cannot
  use: no CUDA plugin, no libtpu): when the backend chooses the platform, the worker runs
  JAX on the CPU instead, with a warning, so the accelerator path's distributed setup
  (coordinator, ranks, multislice variables) runs in CI without accelerators; torch's
  backend does the same with gloo for nccl. A platform the user set is kept.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import logging
import os
from typing import Any

from reference.train._internal.network import address_and_port, host_port
from reference.train.backend import Backend, BackendConfig

logger = logging.getLogger(__name__)

#: multislice variables the controller computes anew for every group: always overwritten
MULTISLICE_OVERRIDES = ("MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES",
                        "MEGASCALE_SLICE_ID")
MEGASCALE_PORT = "8081"
SHUTDOWN_TIMEOUT_VAR = "JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S"
DEFAULT_SHUTDOWN_TIMEOUT_S = 30.0


@dataclasses.dataclass
class JaxConfig(BackendConfig):
    use_tpu: bool = False
    use_gpu: bool = False

    @property
    def backend_cls(self):
        return _JaxBackend

    def to_dict(self) -> dict[str, Any]:
        return {"use_tpu": self.use_tpu, "use_gpu": self.use_gpu}


def _jax_has_cuda() -> bool:
    """Whether a CUDA plugin for jaxlib is installed (without initialising any backend:
    jax.distributed must be initialised before the first computation)."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("jax-cuda") or name.startswith("jaxlib-cuda"):
            return True
    return False


def setup_jax_distributed(coordinator: str, num_workers: int, rank: int, use_tpu: bool,
                          use_gpu: bool, gpus_per_worker: float, env_vars: dict) -> None:
    """On a worker: the platform variables, then jax.distributed.initialize (Ray's order of
    platforms: tpu, then cuda, then cpu)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if not platforms and use_tpu:
        platforms = "tpu"
        if importlib.util.find_spec("libtpu") is None:
            logger.warning("This worker's TPU chips are simulated (no libtpu here): JAX runs "
                           "on the CPU instead of 'tpu'.")
            platforms = "cpu"
        os.environ["JAX_PLATFORMS"] = platforms
    for key, value in env_vars.items():
        if key in MULTISLICE_OVERRIDES or key not in os.environ:
            os.environ[key] = value
    if not platforms and use_gpu:
        platforms = "cuda"
        if not _jax_has_cuda():
            logger.warning("This worker's GPUs are simulated (jax has no CUDA plugin here): "
                           "JAX runs on the CPU instead of 'cuda'.")
            platforms = "cpu"
        os.environ["JAX_PLATFORMS"] = platforms
    import jax

    listed = platforms.split(",")
    if "tpu" in listed:
        jax.distributed.initialize(coordinator, num_workers, rank)
    elif "cuda" in listed:
        k = int(gpus_per_worker)
        jax.distributed.initialize(coordinator, num_workers, rank,
                                   list(range(k)) if k > 0 else 0)
    elif "cpu" in listed:
        jax.distributed.initialize(coordinator, num_workers, rank)


def shutdown_jax_distributed() -> None:
    try:
        import jax

        jax.distributed.shutdown()
    except Exception as exc:  # noqa: BLE001 - logged, as in Ray
        logger.warning("Error during JAX distributed shutdown: %s", exc)


class _JaxBackend(Backend):
    # ml_dtypes, the native dtype library jax imports first, is two thirds of jax's import
    # time and reads no configuration. Not jax itself: its config reads JAX_PLATFORMS and
    # the other JAX_* variables once, when imported, and this backend and the worker's env
    # set them in the worker, after the node would have imported it.
    preload_modules = ("ml_dtypes",) if importlib.util.find_spec("ml_dtypes") else ()

    def on_start(self, worker_group, backend_config: JaxConfig) -> None:
        if not backend_config.use_tpu and not backend_config.use_gpu:
            return
        address, port = worker_group.execute_single(0, address_and_port)
        coordinator = host_port(address, port)
        n = len(worker_group)
        slices = worker_group.get_worker_group_context().num_slices if backend_config.use_tpu \
            else 1
        per_slice = max(1, n // slices)
        resources = worker_group.get_resources_per_worker()
        futures = []
        for rank in range(n):
            env = {}
            if slices > 1:
                env = {"MEGASCALE_COORDINATOR_ADDRESS": address, "MEGASCALE_PORT": MEGASCALE_PORT,
                       "MEGASCALE_NUM_SLICES": str(slices),
                       "MEGASCALE_SLICE_ID": str(min(rank // per_slice, slices - 1))}
            futures.append(worker_group.execute_single_async(
                rank, setup_jax_distributed, coordinator, n, rank, backend_config.use_tpu,
                backend_config.use_gpu, resources.get("GPU", 0), env))
        for future in futures:
            future.result()

    def on_shutdown(self, worker_group, backend_config: JaxConfig) -> None:
        if not backend_config.use_tpu and not backend_config.use_gpu:
            return
        import reference
        from reference.exceptions import GetTimeoutError

        try:
            timeout_s = float(os.environ.get(SHUTDOWN_TIMEOUT_VAR, DEFAULT_SHUTDOWN_TIMEOUT_S))
        except ValueError:
            timeout_s = DEFAULT_SHUTDOWN_TIMEOUT_S
        try:
            reference.get(worker_group.execute_async(shutdown_jax_distributed),
                          timeout=timeout_s)
        except GetTimeoutError:
            logger.warning("JAX distributed shutdown timed out after %s seconds. This may "
                           "indicate workers are hung or unresponsive.", timeout_s)
        except Exception as exc:  # noqa: BLE001 - logged, as in Ray
            logger.warning("Error during JAX distributed shutdown: %s", exc)
