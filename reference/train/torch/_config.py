"""TorchConfig and the torch backend: process group, env vars and device visibility.

The backend's hooks (reference/train/backend.py), as Ray 2.60's torch backend runs them:
- `on_start` (in the driver, once the group's workers are up): picks the torch backend
  (the config's, else nccl with GPUs, tpu_dist with TPUs, gloo otherwise), asks rank 0 for
  its node address and a free port, rejects an init_method other than "env"/"tcp" (so a
  bad one fails the run in the driver, as in Ray), sets MASTER_ADDR/MASTER_PORT on every
  worker for "env" (a tcp:// URL otherwise), the torchrun variables (RANK, WORLD_SIZE,
  LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK) and ACCELERATE_TORCH_DEVICE from each worker's
  train context, then initializes the default process group on every rank at once (even
  for one worker, as Ray does).
- `on_shutdown`: destroys the process group when world size > 1 (a single worker's group
  is left, as Ray leaves it) and frees cached CUDA memory; waits at most
  TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S (default 30 s) and logs a timeout.
- `train_func_context`: selects the worker's CUDA device in the thread that runs the
  training function (the CUDA current device is per thread).
- Sharing: GPU workers of a node see each other's GPUs (`share_cuda_visible_devices`).

Local mode under torchrun is `torchrun_context` (TorchTrainer uses it).

The rendezvous store: torch's own env:// and tcp:// rendezvous start rank 0's TCPStore on
every interface of the host (`[::]:PORT`), whatever MASTER_ADDR says, so any host that
reaches the port could join or feed the group's store. Rank 0 instead binds the listening
socket to the master address itself and hands it to `TCPStore(master_listen_fd=...)`; the
other ranks connect as clients, and the store goes to `init_process_group(store=...)`, which
wraps it in the same "default_pg" prefix as torch's rendezvous does. Where the address cannot
be bound on rank 0's host (not one of its addresses), or torchelastic's agent store is in
use, torch's own rendezvous runs instead (with a warning for the first).

Rank 0's worker binds and listens on the master port when it chooses it (`reserve_master`),
and its store takes that socket over later: no other process can take the port in between
(Ray has that window), and ranks that connect before rank 0's store exists wait in the
socket's backlog instead of backing off (torch's client retries after a refused connection
with a backoff of up to a second, which made a 2-worker fit 5x slower).
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import socket
from datetime import timedelta
from typing import Any, Optional
from urllib.parse import urlparse

import reference
from reference.exceptions import GetTimeoutError
from reference.train._context import TrainContext
from reference.train._internal.network import address_and_port, host_port
from reference.train.backend import Backend, BackendConfig

logger = logging.getLogger(__name__)

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT")
#: Ray's variable (ray/train/constants.py) and default for the shutdown wait
SHUTDOWN_TIMEOUT_VAR = "TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S"
DEFAULT_SHUTDOWN_TIMEOUT_S = 30


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
        return SelectCudaDevice

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "init_method": self.init_method,
                "timeout_s": self.timeout_s}


class SelectCudaDevice:
    """Around the training function: make the worker's device the current CUDA device, and
    the device `iter_torch_batches(device="auto")` moves batches to."""

    def __enter__(self):
        import torch

        from reference.data.devices import set_auto_device
        from reference.train.torch import get_device

        set_auto_device(get_device)
        if torch.cuda.is_available():
            device = get_device()
            if device.type == "cuda":
                torch.cuda.set_device(device)

    def __exit__(self, *exc_info):
        from reference.data.devices import set_auto_device

        set_auto_device(None)
        return False


# --------------------------------------------------------------- run on the workers
def set_master(addr: str, port: int) -> None:
    os.environ["MASTER_ADDR"] = addr
    os.environ["MASTER_PORT"] = str(port)


def set_torchrun_env() -> None:
    """torchrun's variables from this worker's train context, and Accelerate's device."""
    from reference.train import get_context
    from reference.train.torch import get_device

    context = get_context()
    os.environ.update(
        LOCAL_RANK=str(context.get_local_rank()),
        LOCAL_WORLD_SIZE=str(context.get_local_world_size()),
        NODE_RANK=str(context.get_node_rank()), RANK=str(context.get_world_rank()),
        WORLD_SIZE=str(context.get_world_size()), ACCELERATE_TORCH_DEVICE=str(get_device()))


def setup_process_group(backend: str, world_rank: int, world_size: int, init_method: str,
                        timeout_s: int) -> None:
    import torch.distributed as dist

    from reference.train.torch import _devices

    backend = _devices.resolve_backend(backend)
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
    timeout = timedelta(seconds=timeout_s)
    store = rendezvous_store(init_method, world_rank, world_size, timeout)
    if store is None:
        dist.init_process_group(backend=backend, init_method=init_method, rank=world_rank,
                                world_size=world_size, timeout=timeout)
    else:
        dist.init_process_group(backend=backend, store=store, rank=world_rank,
                                world_size=world_size, timeout=timeout)


#: rank 0's listening socket, from `reserve_master` until its store takes it over
_reserved: dict[tuple[str, int], socket.socket] = {}


def reserve_master() -> tuple[str, int]:
    """(address, port) of rank 0's store, already listening on that address only (where the
    address is one of this host's; else only chosen, and torch's rendezvous binds it)."""
    addr, port = address_and_port()
    for sock in _reserved.values():  # a group started again in this process
        sock.close()
    _reserved.clear()
    try:
        _reserved[(addr, port)] = listening_socket(addr, port)
    except OSError as e:
        if e.errno != errno.EADDRNOTAVAIL:
            raise
    return addr, port


def master_endpoint(init_method: str) -> tuple[str, int]:
    """The (address, port) rank 0's store serves, from a tcp:// URL or MASTER_ADDR/PORT."""
    if init_method.startswith("tcp://"):
        url = urlparse(init_method)
        return url.hostname or "", int(url.port or 0)
    return os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])


def rendezvous_store(init_method: str, rank: int, world_size: int, timeout: timedelta):
    """The group's TCPStore, rank 0's listening on the master address only; None where
    torch's own rendezvous must run (see the module's note)."""
    from torch.distributed import TCPStore

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        return None
    host, port = master_endpoint(init_method)
    use_libuv = os.environ.get("USE_LIBUV", "1") == "1"  # what torch's rendezvous reads
    if rank != 0:
        return TCPStore(host, port, world_size, False, timeout, use_libuv=use_libuv)
    try:
        listener = _reserved.pop((host, port), None) or listening_socket(host, port)
    except OSError as e:
        if e.errno != errno.EADDRNOTAVAIL:
            raise
        logger.warning("The torch rendezvous store cannot listen on MASTER_ADDR=%s only (%s); "
                       "torch's own rendezvous listens on every address of this host.", host, e)
        return None
    with listener:
        # The store owns (and closes) the descriptor it gets: hand it a duplicate.
        return TCPStore(host, port, world_size, True, timeout,
                        master_listen_fd=os.dup(listener.fileno()), use_libuv=use_libuv)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host`:`port` only."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's server does
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def shutdown_torch(destroy_process_group: bool = False) -> None:
    import torch
    import torch.distributed as dist

    from reference.train.torch import _devices

    devices = _devices.worker_devices()
    if destroy_process_group and dist.is_initialized():
        dist.destroy_process_group()
    if torch.cuda.is_available():
        for device in devices:
            if device.type == "cuda":
                with torch.cuda.device(device):
                    torch.cuda.empty_cache()


# --------------------------------------------------------------- the backend (driver side)
class TorchBackend(Backend):
    #: GPU workers of a node see each other's GPUs (NCCL needs its peers' devices).
    share_cuda_visible_devices: bool = True
    preload_modules = ("torch", "torch.distributed", "torch.distributed._functional_collectives",
                       "reference.train.torch")

    def on_start(self, worker_group, backend_config: TorchConfig) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            raise RuntimeError("Distributed torch is not available.")
        backend = backend_config.backend
        if backend is None:
            resources = worker_group.get_resources_per_worker()
            backend = ("nccl" if resources.get("GPU", 0) > 0 else
                       "tpu_dist" if resources.get("TPU", 0) > 0 else "gloo")
        master_addr, master_port = worker_group.execute_single(0, reserve_master)
        if backend_config.init_method == "env":
            worker_group.execute(set_master, addr=master_addr, port=master_port)
            url = "env://"
        elif backend_config.init_method == "tcp":
            url = f"tcp://{host_port(master_addr, master_port)}"
        else:
            raise ValueError(
                f"The provided init_method ({backend_config.init_method}) is not supported. "
                "Must be either 'env' or 'tcp'.")
        # Every worker would fail on this with the same TypeError; failing here fails the
        # run in the driver, where Ray fails it too.
        timedelta(seconds=backend_config.timeout_s)
        if backend == "tpu_dist":
            tpus = worker_group.get_resources_per_worker().get("TPU", 0)
            if tpus != 1:
                logger.warning(
                    "For PyTorch TPU training, it is recommended that each worker has "
                    "exactly 1 TPU device. Got resources_per_worker={'TPU': %s}. Note that "
                    "the PyTorch TPU runtime binds each process to a single TPU device.", tpus)
        worker_group.execute(set_torchrun_env)
        world_size = len(worker_group)
        reference.get([
            worker_group.execute_single_async(
                rank, setup_process_group, backend=backend, world_rank=rank,
                world_size=world_size, init_method=url, timeout_s=backend_config.timeout_s)
            for rank in range(world_size)])

    def on_shutdown(self, worker_group, backend_config: TorchConfig) -> None:
        futures = worker_group.execute_async(shutdown_torch,
                                             destroy_process_group=len(worker_group) > 1)
        timeout_s = _env_int(SHUTDOWN_TIMEOUT_VAR, DEFAULT_SHUTDOWN_TIMEOUT_S)
        try:
            reference.get(futures, timeout=timeout_s)
        except GetTimeoutError:
            logger.warning("Torch process group shutdown timed out after %s seconds",
                           timeout_s)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    try:
        return default if raw is None else int(raw)
    except ValueError:
        logger.warning("%s=%r is not an integer; using %s.", name, raw, default)
        return default


def torchrun_context(experiment_name: str) -> TrainContext | None:
    """Under torchrun (all of TORCHRUN_VARS set) local mode joins torchrun's process group,
    nccl with CUDA else gloo (TorchConfig.backend is not consulted, as in Ray), and takes
    its ranks from it; otherwise it is a single process (None)."""
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
    return TrainContext(experiment_name=experiment_name, world_size=dist.get_world_size(),
                        world_rank=rank, local_rank=local_rank,
                        local_world_size=local_world_size, node_rank=rank // local_world_size)


def under_torchrun() -> bool:
    return all(var in os.environ for var in TORCHRUN_VARS)
