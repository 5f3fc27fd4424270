"""TorchConfig and the torch backend: process group, env vars and device visibility.

Hooks (see reference.train._backend):
- `worker_env` (in the controller, before the workers start): the torchrun variables of
  each rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK), the rendezvous
  (MASTER_ADDR/MASTER_PORT for init_method "env": rank 0's node and a free port), which
  devices the rank holds, and CUDA_VISIBLE_DEVICES shared by the GPU workers of a node.
  A bad init_method is rejected here, so it fails the run in the controller, as in Ray.
- `worker_setup` (in each worker, before the training function): picks the backend,
  initializes the default process group (even for one worker, as Ray does), selects the
  CUDA device, sets ACCELERATE_TORCH_DEVICE.
- `worker_teardown`: destroys the process group when world size > 1 (a single worker's
  group is left, as Ray leaves it) and frees cached CUDA memory.
- `local_context`: local mode under torchrun (see `local_context` below).

Ordering hazard: the free port is chosen in the controller and bound later by rank 0's
rendezvous store; another process could take it in between. Ray has the same window
(rank 0 picks the port, then binds it later); a new group of a retried run picks anew.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
from datetime import timedelta
from typing import Any, Optional

from reference.train._backend import Backend, BackendConfig
from reference.train._context import TrainContext
from reference.train._internal.accelerators import assignment_env, shared_visible_ids

logger = logging.getLogger(__name__)

#: The rendezvous URL a worker passes to init_process_group (env:// or tcp://host:port).
INIT_URL_VAR = "REFERENCE_TRAIN_TORCH_INIT_URL"
SHARE_CUDA_VISIBLE_DEVICES_VAR = "TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES"
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT")


@dataclasses.dataclass
class TorchConfig(BackendConfig):
    """How the workers' torch.distributed process group is set up.

    Args:
        backend: the torch.distributed backend; None lets the trainer choose ("nccl" with
            GPUs, "tpu_dist" with TPUs, else "gloo").
        init_method: "env" (MASTER_ADDR/MASTER_PORT and env://) or "tcp" (tcp://host:port).
        timeout_s: seconds before process-group operations time out.

    Like Ray, the fields are not checked here: a bad value fails `fit()`.
    """

    backend: Optional[str] = None
    init_method: str = "env"
    timeout_s: int = 1800

    @property
    def backend_cls(self):
        return TorchBackend

    @property
    def train_func_context(self):
        # The CUDA device is selected in worker_setup, before the function runs.
        import contextlib

        return contextlib.nullcontext

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "init_method": self.init_method,
                "timeout_s": self.timeout_s}


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.lower() in ("1", "true")


def _free_port(address: str) -> int:
    # Rank 0's rendezvous store listens on every address of its host, so the port must be
    # free on all of them, not only on the node's address: simulated nodes share one host
    # whose other addresses (127.0.0.x) hold ports of their own.
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class TorchBackend(Backend):
    #: GPU workers of a node see each other's GPUs (NCCL needs its peers' devices).
    share_cuda_visible_devices: bool = True
    preload_modules = ("torch", "torch.distributed", "torch.distributed._functional_collectives",
                       "reference.train.torch")

    def worker_env(self, backend_config: TorchConfig, slots: list) -> list[dict]:
        if backend_config.init_method not in ("env", "tcp"):
            raise ValueError(
                f"The provided init_method ({backend_config.init_method}) is not supported. "
                "Must be either 'env' or 'tcp'.")
        # The workers would fail on this with the same TypeError; failing here fails the
        # run in the controller, where Ray fails it too.
        timedelta(seconds=backend_config.timeout_s)
        if not slots:
            return []
        master_addr = slots[0].node_address
        master_port = _free_port(master_addr)
        tcp = backend_config.init_method == "tcp"
        url = f"tcp://{_host_port(master_addr, master_port)}" if tcp else "env://"
        shared = [None] * len(slots)
        if _env_flag(SHARE_CUDA_VISIBLE_DEVICES_VAR, self.share_cuda_visible_devices):
            shared = shared_visible_ids(slots, "GPU")
        envs = []
        for slot, cuda_visible in zip(slots, shared, strict=True):
            env = {"RANK": str(slot.rank), "WORLD_SIZE": str(slot.world_size),
                   "LOCAL_RANK": str(slot.local_rank),
                   "LOCAL_WORLD_SIZE": str(slot.local_world_size),
                   "NODE_RANK": str(slot.node_rank), INIT_URL_VAR: url,
                   **assignment_env(slot.accelerator, slot.accelerator_ids)}
            if not tcp:
                env.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
            if cuda_visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = cuda_visible
            if slot.accelerator == "TPU" and len(slot.accelerator_ids) != 1 and slot.rank == 0:
                logger.warning(
                    "For PyTorch TPU training, each worker should hold exactly 1 TPU "
                    "device; got %d. The PyTorch TPU runtime binds each process to a "
                    "single device.", len(slot.accelerator_ids))
            envs.append(env)
        return envs

    def worker_setup(self, backend_config: TorchConfig):
        return functools.partial(setup_worker, backend_config)

    def worker_teardown(self, backend_config: TorchConfig):
        return teardown_worker

    def local_context(self, backend_config: TorchConfig, experiment_name: str):
        """Under torchrun (all of TORCHRUN_VARS set) local mode joins torchrun's process
        group, nccl with CUDA else gloo (TorchConfig.backend is not consulted, as in Ray),
        and takes its ranks from it; otherwise it is a single process (None)."""
        if not under_torchrun():
            return None
        import torch
        import torch.distributed as dist

        assert not dist.is_initialized(), "torch.distributed is already initialized"
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        local_rank = int(os.environ["LOCAL_RANK"])
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        rank, local_world_size = dist.get_rank(), int(os.environ["LOCAL_WORLD_SIZE"])
        return TrainContext(experiment_name=experiment_name,
                            world_size=dist.get_world_size(), world_rank=rank,
                            local_rank=local_rank, local_world_size=local_world_size,
                            node_rank=rank // local_world_size)


def under_torchrun() -> bool:
    return all(var in os.environ for var in TORCHRUN_VARS)


def setup_worker(backend_config: TorchConfig, context: TrainContext) -> None:
    """Runs in each worker before the training function (picklable through partial)."""
    import torch
    import torch.distributed as dist

    from reference.train.torch import _devices

    if not dist.is_available():
        raise RuntimeError("Distributed torch is not available.")
    backend = _devices.resolve_backend(backend_config.backend)
    if _devices.uses_nccl(backend) and "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in os.environ \
            and "TORCH_NCCL_BLOCKING_WAIT" not in os.environ:
        # A timed-out collective then fails the worker instead of hanging it.
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    elif backend == "tpu_dist":
        try:
            import torch_tpu._loader
        except ImportError as exc:
            raise ImportError(
                "The `torch_tpu` module is required to use PyTorch TPU distributed "
                "training. Please install it or ensure it is available in your "
                "environment.") from exc
        torch_tpu._loader.load()
    devices = _devices.worker_devices()
    os.environ["ACCELERATE_TORCH_DEVICE"] = str(devices[0])
    dist.init_process_group(
        backend=backend, init_method=os.environ.get(INIT_URL_VAR, "env://"),
        rank=context.world_rank, world_size=context.world_size,
        timeout=timedelta(seconds=backend_config.timeout_s))
    if torch.cuda.is_available() and devices[0].type == "cuda":
        torch.cuda.set_device(devices[0])


def teardown_worker(context: TrainContext) -> None:
    import torch
    import torch.distributed as dist

    from reference.train.torch import _devices

    if context.world_size > 1 and dist.is_initialized():
        dist.destroy_process_group()
    if torch.cuda.is_available():
        for device in _devices.worker_devices():
            if device.type == "cuda":
                with torch.cuda.device(device):
                    torch.cuda.empty_cache()
