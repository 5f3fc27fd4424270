"""Real rank processes for the torch backend tests, without a cluster.

`RankPool(n)` keeps n processes (forked from a server that imported torch once). `run`
gives ranks 0..W-1 the environment TorchBackend.worker_env computed for W slots, a
session carrying their TrainContext, runs the backend's setup, the function and the
teardown in them, and returns each rank's value: a real gloo process group per call.
Between calls a rank restores its environment and destroys any process group left over,
so one pool serves many worlds of different sizes.

Every wait has a deadline; on a timeout or a failed rank the pool kills its processes and
starts fresh ones, so a stuck collective costs one test, not the session.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback

import cloudpickle

from reference.train._internal.session import Session, set_session

# DDP imports torch._dynamo (via functional collectives) on first use: seconds per process.
PRELOAD = ["torch_rank_pool", "torch_rank_fns", "torch", "torch.distributed",
           "torch.distributed._functional_collectives", "reference.train.torch"]


class RankSession(Session):
    """What a worker session offers the prepare_* utilities: the context, nothing else."""

    def __init__(self, context):
        self.context = context

    def report(self, *args, **kwargs) -> None:
        pass

    def get_checkpoint(self):
        return None

    def get_all_reported_checkpoints(self, consistency_mode, timeout_s) -> list:
        return []


def _run_task(blob: bytes) -> bytes:
    env, context, setup, teardown, fn, args = cloudpickle.loads(blob)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        if context is not None:
            set_session(RankSession(context))
        for hook in setup:
            hook(context)
        value = fn(*args)
        for hook in teardown:
            hook(context)
        return cloudpickle.dumps(("ok", value))
    except BaseException:  # noqa: BLE001 - reported to the parent with the traceback
        return cloudpickle.dumps(("error", traceback.format_exc()))
    finally:
        set_session(None)
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        os.environ.clear()
        os.environ.update(saved)


def _serve(conn) -> None:
    while True:
        try:
            blob = conn.recv_bytes()
        except EOFError:
            return
        if not blob:
            return
        conn.send_bytes(_run_task(blob))


class RankError(AssertionError):
    pass


class RankPool:
    def __init__(self, size: int):
        self.size = size
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        self._procs: list = []
        self._conns: list = []
        self._start()

    def _start(self) -> None:
        for _ in range(self.size):
            parent, child = self._ctx.Pipe()
            proc = self._ctx.Process(target=_serve, args=(child,), daemon=True)
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send_bytes(b"")
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []

    def restart(self) -> None:
        self.close()
        self._start()

    def run_tasks(self, tasks: list[tuple], timeout: float = 120.0) -> list:
        """Run task i on process i: (env, context, setup, teardown, fn, args)."""
        assert len(tasks) <= self.size, f"{len(tasks)} tasks for a pool of {self.size}"
        for conn, task in zip(self._conns, tasks, strict=False):
            conn.send_bytes(cloudpickle.dumps(task))
        deadline = time.monotonic() + timeout
        replies: list = []
        for rank, conn in enumerate(self._conns[:len(tasks)]):
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                self.restart()
                raise TimeoutError(f"rank {rank} gave no answer within {timeout} s")
            replies.append(cloudpickle.loads(conn.recv_bytes()))
        failed = {rank: text for rank, (kind, text) in enumerate(replies) if kind == "error"}
        if failed:
            # A rank that failed may have left its peers inside a collective.
            self.restart()
            raise RankError("\n".join(f"rank {r}:\n{t}" for r, t in failed.items()))
        return [value for _, value in replies]

    def run(self, backend_config, slots: list, fn, *args, timeout: float = 120.0) -> list:
        """Every slot's rank runs the backend's hooks around fn(*args)."""
        from reference.train._context import TrainContext

        backend = backend_config.backend_cls()
        envs = backend.worker_env(backend_config, slots)
        hooks = ([h for h in (backend.worker_setup(backend_config),) if h],
                 [h for h in (backend.worker_teardown(backend_config),) if h])
        tasks = []
        for slot, env in zip(slots, envs, strict=True):
            context = TrainContext(
                experiment_name="rank-pool", world_size=slot.world_size, world_rank=slot.rank,
                local_rank=slot.local_rank, local_world_size=slot.local_world_size,
                node_rank=slot.node_rank)
            tasks.append((env, context, *hooks, fn, args))
        return self.run_tasks(tasks, timeout)


def make_slots(world_size: int, nodes: int = 1, accelerator: str | None = None,
               ids_per_worker: int = 0) -> list:
    """Slots of `world_size` ranks spread contiguously over `nodes` loopback nodes."""
    from reference.train._internal.worker_group.api import WorkerSlot

    per_node = -(-world_size // nodes)
    slots = []
    for rank in range(world_size):
        node, local = divmod(rank, per_node)
        local_world = min(per_node, world_size - node * per_node)
        ids = tuple(range(local * ids_per_worker, (local + 1) * ids_per_worker))
        slots.append(WorkerSlot(
            rank=rank, local_rank=local, node_rank=node, world_size=world_size,
            local_world_size=local_world, node_id=f"node-{node}", node_address="127.0.0.1",
            accelerator=accelerator, accelerator_ids=ids))
    return slots
