"""Real rank processes for the torch backend tests, without a cluster.

`RankPool(n)` keeps n processes (forked from a server that imported torch once).
`pool.group(backend_config, slots)` gives ranks 0..W-1 the environment a worker group's
workers start with and a session carrying their TrainContext, and yields an
`ExecutionGroup` over them, the object a Backend's hooks get in a real run; `run` drives a
backend through it (on_start, on_training_start, the function on every rank, on_shutdown)
and returns each rank's value: a real gloo process group per call. Afterwards a rank
restores its environment and destroys any process group left over, so one pool serves
many worlds of different sizes. `run_tasks` runs plain functions with a given environment.

Every wait has a deadline; on a timeout or a failed rank the pool kills its processes and
starts fresh ones, so a stuck collective costs one test, not the session.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import threading
import time
import traceback
from concurrent.futures import Future

import cloudpickle

from reference.exceptions import RayActorError, RayTaskError
from reference.train._internal.session import Session, set_session

# DDP imports torch._dynamo on first use (torch 2.13: DistributedDataParallel.__init__ asks
# it for the optimize_ddp mode): seconds per process, unless the forkserver has it.
PRELOAD = ["torch_rank_pool", "torch_rank_fns", "torch", "torch.distributed",
           "torch.distributed._functional_collectives", "torch._dynamo", "reference.train.torch"]


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


# ------------------------------------------------------------------ in the rank processes
class _Rank:
    def __init__(self):
        self.saved: dict | None = None

    def begin(self, env: dict, context) -> None:
        self.saved = dict(os.environ)
        os.environ.update(env)
        if context is not None:
            set_session(RankSession(context))

    def end(self) -> None:
        set_session(None)
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        if self.saved is not None:
            os.environ.clear()
            os.environ.update(self.saved)
            self.saved = None

    def handle(self, kind: str, payload):
        from reference.train._internal.worker_group.execution import run_call

        if kind == "call":
            return run_call(payload)
        try:
            if kind == "begin":
                self.begin(*payload)
                return True, None, ""
            if kind == "end":
                self.end()
                return True, None, ""
            env, context, fn, args = payload  # "task": a whole function in one go
            self.begin(env, context)
            try:
                return True, fn(*args), ""
            finally:
                self.end()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            return False, RuntimeError(repr(exc)), traceback.format_exc()


def _serve(conn) -> None:
    rank = _Rank()
    while True:
        try:
            blob = conn.recv_bytes()
        except EOFError:
            return
        if not blob:
            return
        conn.send_bytes(cloudpickle.dumps(rank.handle(*cloudpickle.loads(blob))))


# ------------------------------------------------------------------ in the test process
class RankError(AssertionError):
    pass


class _Conn:
    """One rank process: requests go out in order, a reader thread resolves their futures
    in the same order."""

    def __init__(self, ctx, rank: int):
        self.rank = rank
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn, self.pending = parent, collections.deque()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def request(self, kind: str, payload) -> Future:
        future: Future = Future()
        with self.lock:
            self.pending.append(future)
            try:
                self.conn.send_bytes(cloudpickle.dumps((kind, payload)))
            except OSError:
                self.pending.remove(future)
                future.set_exception(RayActorError(f"rank {self.rank}'s process is gone"))
        return future

    def _read(self) -> None:
        from reference.train._internal.worker_group.execution import tried

        while True:
            try:
                outcome = cloudpickle.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                break
            with self.lock:
                future = self.pending.popleft()
            tried(outcome, self.rank, future)
        with self.lock:
            left, self.pending = list(self.pending), collections.deque()
        for future in left:
            future.set_exception(RayActorError(f"rank {self.rank}'s process is gone"))

    def close(self, deadline: float) -> None:
        try:
            self.conn.send_bytes(b"")
        except OSError:
            pass
        self.proc.join(max(0.0, deadline - time.monotonic()))
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()
        self.reader.join(5)


class RankPool:
    def __init__(self, size: int):
        self.size = size
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        self._conns: list[_Conn] = []
        self._start()

    def _start(self) -> None:
        self._conns = [_Conn(self._ctx, rank) for rank in range(self.size)]

    def close(self) -> None:
        deadline = time.monotonic() + 5
        for conn in self._conns:
            conn.close(deadline)
        self._conns = []

    def restart(self) -> None:
        self.close()
        self._start()

    def _kill(self) -> None:
        for conn in self._conns:
            if conn.proc.is_alive():
                conn.proc.kill()

    def run_tasks(self, tasks: list[tuple], timeout: float = 120.0) -> list:
        """Run task i on process i: (env, context, fn, args)."""
        assert len(tasks) <= self.size, f"{len(tasks)} tasks for a pool of {self.size}"
        futures = [c.request("task", t) for c, t in zip(self._conns, tasks, strict=False)]
        return self._values(futures, timeout)

    def _values(self, futures: list[Future], timeout: float) -> list:
        import reference

        try:
            return reference.get(futures, timeout=timeout)
        except reference.exceptions.GetTimeoutError:
            self.restart()
            raise TimeoutError(f"a rank gave no answer within {timeout} s") from None
        except (RayTaskError, RayActorError) as exc:
            # A rank that failed may have left its peers inside a collective.
            self.restart()
            raise RankError(str(exc)) from None

    @contextlib.contextmanager
    def group(self, backend_config, slots: list, timeout: float = 120.0):
        """An ExecutionGroup over ranks set up as `slots` say (see the module docstring);
        the ranks are killed if the block takes longer than `timeout`."""
        from reference.train._context import TrainContext
        from reference.train._internal.accelerators import launch_env
        from reference.train._internal.worker_group.execution import (
            DistributedContext,
            ExecutionGroup,
            Worker,
            WorkerGroupContext,
            WorkerMetadata,
        )

        assert len(slots) <= self.size, f"{len(slots)} ranks for a pool of {self.size}"
        backend = backend_config.backend_cls()
        envs = launch_env(slots, backend.share_cuda_visible_devices)
        workers, begins = [], []
        for conn, slot, env in zip(self._conns, slots, envs, strict=False):
            context = TrainContext(
                experiment_name="rank-pool", world_size=slot.world_size, world_rank=slot.rank,
                local_rank=slot.local_rank, local_world_size=slot.local_world_size,
                node_rank=slot.node_rank)
            begins.append(conn.request("begin", (env, context)))
            kind = "TPU" if slot.accelerator == "TPU" else "GPU"
            workers.append(Worker(
                metadata=WorkerMetadata("localhost", slot.node_id, slot.node_address,
                                        conn.proc.pid, {kind: list(slot.accelerator_ids)}),
                distributed_context=DistributedContext(
                    slot.rank, slot.world_size, slot.local_rank, slot.local_world_size,
                    slot.node_rank),
                resources={}, submit=lambda blob, c=conn: c.request("call", blob)))
        self._values(begins, timeout)
        per_worker = {"GPU": 1} if slots and slots[0].accelerator in ("CUDA", "ROCm") else \
            {"TPU": 1} if slots and slots[0].accelerator == "TPU" else {"CPU": 1}
        group = ExecutionGroup(workers, WorkerGroupContext(len(slots), per_worker, "PACK"))
        watchdog = threading.Timer(timeout, self._kill)
        watchdog.start()
        failed = True
        try:
            yield group
            failed = False
        except (RayTaskError, RayActorError) as exc:
            raise (TimeoutError(f"the ranks did not finish within {timeout} s")
                   if not watchdog.is_alive() else RankError(str(exc))) from None
        finally:
            watchdog.cancel()
            if failed:
                self.restart()
            else:
                self._values([c.request("end", None) for c in self._conns[:len(slots)]],
                             timeout)

    def run(self, backend_config, slots: list, fn, *args, timeout: float = 120.0) -> list:
        """Every slot's rank runs fn(*args) between the backend's on_start /
        on_training_start and on_shutdown."""
        backend = backend_config.backend_cls()
        with self.group(backend_config, slots, timeout) as group:
            backend.on_start(group, backend_config)
            backend.on_training_start(group, backend_config)
            values = group.execute(fn, *args)
            backend.on_shutdown(group, backend_config)
        return values


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
