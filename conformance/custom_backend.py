"""A backend written for Ray 2.60 (``import ray``), as a framework author writes one; the
backend checks run it unmodified on every implementation by swapping the import root.

It records what its hooks see in a journal folder named by the config: in the process that
runs the hooks, `hooks.jsonl` (hook name, pid, group size, the workers' metadata and
ranks, what executed functions returned); on each worker, the variables the hooks set.
`fail_in` makes a hook raise (in the driver, or on rank 1 through an executed function), or
("worker_dies_once") makes rank 1's process exit during the first group's on_start.
"""

import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import ray
from ray.train.backend import Backend, BackendConfig


def _record(journal: str, **fields) -> None:
    with open(os.path.join(journal, "hooks.jsonl"), "a") as f:
        f.write(json.dumps(fields) + "\n")


def set_env(name: str, value: str) -> int:
    os.environ[name] = value
    return os.getpid()


def context_rank() -> int:
    return ray.train.get_context().get_world_rank()


def address_and_port():
    with socket.socket() as sock:
        sock.bind(("", 0))
        return socket.gethostname(), sock.getsockname()[1]


def fail_on_rank_1() -> None:
    if ray.train.get_context().get_world_rank() == 1:
        raise KeyError("custom backend setup failed on rank 1")


def exit_on_rank_1() -> None:
    if ray.train.get_context().get_world_rank() == 1:
        os._exit(1)


def write_shutdown_marker(journal: str) -> None:
    rank = ray.train.get_context().get_world_rank()
    with open(os.path.join(journal, f"shutdown-{rank}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "in_context": os.environ.get("CUSTOM_IN_CONTEXT")}, f)


@contextmanager
def in_custom_context():
    os.environ["CUSTOM_IN_CONTEXT"] = "1"
    try:
        yield
    finally:
        os.environ["CUSTOM_IN_CONTEXT"] = "exited"


class _CustomBackend(Backend):
    def on_start(self, worker_group, backend_config):
        journal = backend_config.journal
        if backend_config.fail_in == "on_start":
            raise ValueError("custom backend rejected its configuration")
        if backend_config.wait_for:  # until the check lets the group go on (or 60 s)
            _record(journal, hook="on_start_waits", pid=os.getpid())
            deadline = time.monotonic() + 60.0
            while not os.path.exists(backend_config.wait_for) and time.monotonic() < deadline:
                time.sleep(0.05)
        dies = os.path.join(journal, "rank-1-died")
        if backend_config.fail_in == "worker_dies_once" and not os.path.exists(dies):
            open(dies, "w").close()  # only the first group's rank 1 dies
            ray.get(worker_group.execute_async(exit_on_rank_1))
        workers = worker_group.get_workers()
        pids = worker_group.execute(set_env, "CUSTOM_ON_START", "1")
        futures = [worker_group.execute_single_async(i, set_env, "CUSTOM_RANK",
                                                     str(w.distributed_context.world_rank))
                   for i, w in enumerate(workers)]
        ray.get(futures)
        host, port = worker_group.execute_single(0, address_and_port)
        worker_group.execute(set_env, "CUSTOM_MASTER", f"{host}:{port}")
        if backend_config.fail_in == "worker":
            ray.get(worker_group.execute_async(fail_on_rank_1))
        _record(journal, hook="on_start", pid=os.getpid(), size=len(worker_group),
                executed_pids=pids,
                metadata_pids=[w.metadata.pid for w in workers],
                node_ips=[w.metadata.node_ip for w in workers],
                ranks=[w.distributed_context.world_rank for w in workers],
                local_ranks=[w.distributed_context.local_rank for w in workers],
                resources=worker_group.get_resources_per_worker())

    def on_training_start(self, worker_group, backend_config):
        ranks = worker_group.execute(context_rank)
        worker_group.execute(set_env, "CUSTOM_TRAINING_START", "1")
        _record(backend_config.journal, hook="on_training_start", pid=os.getpid(),
                context_ranks=ranks)

    def on_shutdown(self, worker_group, backend_config):
        ray.get(worker_group.execute_async(write_shutdown_marker, backend_config.journal))
        _record(backend_config.journal, hook="on_shutdown", pid=os.getpid())
        if backend_config.fail_in == "on_shutdown":
            raise RuntimeError("custom backend shutdown failed")


class FailingCallback(ray.train.UserCallback):
    """A UserCallback whose after_report raises (a controller error, not a worker's)."""

    def after_report(self, run_context, metrics, checkpoint):
        raise RuntimeError("the user callback failed")


@dataclass
class CustomConfig(BackendConfig):
    journal: str = ""
    fail_in: Optional[str] = None
    #: a file on_start waits for before it sets the group up (None: no wait)
    wait_for: Optional[str] = None

    @property
    def backend_cls(self):
        return _CustomBackend

    @property
    def train_func_context(self):
        return in_custom_context


def train_fn(config: dict) -> None:
    """What a worker sees of the hooks, in `worker-<rank>.json` of the journal."""
    context = ray.train.get_context()
    seen = {k: os.environ.get(k) for k in ("CUSTOM_ON_START", "CUSTOM_RANK", "CUSTOM_MASTER",
                                           "CUSTOM_TRAINING_START", "CUSTOM_IN_CONTEXT")}
    seen.update(rank=context.get_world_rank(), pid=os.getpid())
    with open(os.path.join(config["journal"], f"worker-{seen['rank']}.json"), "w") as f:
        json.dump(seen, f)
    ray.train.report({"rank": seen["rank"]})
