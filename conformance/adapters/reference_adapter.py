"""Adapter for trainspec's own reference implementation (`reference.train`).

fit() runs in a thread of the test process (the reference's driver is in-process, as Ray's
is); the deadline is enforced by joining that thread, and on expiry the stacks of every
thread are dumped into the outcome. Multi-node clusters come from `simcluster`, on the
provider `--sim-provider` (or $TRAINSPEC_SIM_PROVIDER) names: `process` (default), `netns`
or `docker`, so the multi-node, elastic and fault-matrix checks run on containers too.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
import traceback

from conformance.adapters.base import (
    Adapter,
    ClusterHandle,
    FitHandle,
    NodeSpec,
    Outcome,
    journal_dir_of,
    timed,
)


def _all_stacks() -> str:
    """Every thread's stack but the caller's (the test waiting on the fit says nothing)."""
    lines = []
    names = {t.ident: t.name for t in threading.enumerate()}
    for tid, frame in sys._current_frames().items():
        if tid == threading.get_ident():
            continue
        lines.append(f"--- thread {names.get(tid, tid)}")
        lines.extend(traceback.format_stack(frame))
    return "".join(lines)


class _ThreadFit(FitHandle):
    def __init__(self, adapter: Adapter, make_trainer, deadline_s: float):
        self._adapter, self._deadline_s = adapter, deadline_s
        self._outcome: Outcome | None = None
        self._journal_dir = journal_dir_of(make_trainer)
        self._start = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, args=(make_trainer,), name="trainspec-fit", daemon=True
        )
        self._thread.start()

    def _run(self, make_trainer):
        self._outcome = timed(lambda: make_trainer().fit())

    def wait(self) -> Outcome:
        self._thread.join(max(0.0, self._deadline_s - (time.monotonic() - self._start)))
        if self._thread.is_alive():
            stacks = _all_stacks()
            self._adapter.reset()
            return Outcome(hang=True, elapsed_s=time.monotonic() - self._start, stacks=stacks,
                           journal_dir=self._journal_dir)
        return self._outcome


#: where the suite's option reaches the adapter (also in xdist workers and matrix cells)
SIM_PROVIDER_ENV = "TRAINSPEC_SIM_PROVIDER"


def sim_provider(given: str | None = None) -> str:
    """The simcluster provider in use: the one given, else $TRAINSPEC_SIM_PROVIDER, else
    'process'."""
    return given or os.environ.get(SIM_PROVIDER_ENV) or "process"

#: what the nodes import once when a check asks for a framework (`framework(name)`): the
#: integrations that run inside TorchTrainer's workers, which its backend's preload (torch)
#: does not cover; each costs seconds of imports per worker process otherwise. JAX is not
#: here: it reads JAX_PLATFORMS when imported, and the backend sets that in the worker.
FRAMEWORK_PRELOAD = {
    "lightning": ("reference.train.lightning", "conformance.lightning_probe"),
    "huggingface.transformers": ("reference.train.huggingface.transformers",
                                 "conformance.transformers_probe"),
}
#: how long a framework's preload may take on every node (they import side by side)
PRELOAD_TIMEOUT_S = 300.0


def check_sim_provider(name: str) -> str:
    """`name` if it is a simcluster provider that can run here; else a ValueError naming
    `--sim-provider`, what is allowed, and why this one cannot run."""
    simcluster = importlib.import_module("simcluster")
    if name not in simcluster.PROVIDER_NAMES:
        raise ValueError(f"--sim-provider {name!r}: expected one of "
                         f"{', '.join(simcluster.PROVIDER_NAMES)}")
    why = simcluster.provider_unavailable(name)
    if why:
        raise ValueError(f"--sim-provider {name!r} cannot run here: {why}")
    return name


class ReferenceAdapter(Adapter):
    name = "reference"
    capabilities = frozenset({"multinode", "add_node", "remove_node", "kill_node", "pause_node",
                              "preempt_node", "fail_upload", "elastic", "tpu_slices"})
    fit_deadline_s = 60.0
    fit_examples = 10
    report_settle_s = 0.05  # a report returns once committed and registered
    elastic_interval_s = 0.5
    history_checks = ("ranks_complete", "restores_latest", "checkpoints_whole")

    def __init__(self, provider: str | None = None) -> None:
        #: the simcluster provider of `cluster()` and `tpu_slices()`
        self.provider = sim_provider(provider)
        #: (the cluster, the modules its nodes were asked to import by `_preload`)
        self._preloaded: tuple = (None, set())

    def describe(self) -> str:
        return f"{super().describe()} sim-provider={self.provider}"

    @property
    def train(self):
        return importlib.import_module("reference.train")

    def version(self) -> str:
        import reference

        return getattr(reference, "__version__", "unknown")

    def framework(self, name: str):
        module = super().framework(name)
        self._preload(FRAMEWORK_PRELOAD.get(name, ()))
        return module

    def _preload(self, modules: tuple) -> None:
        """Have the current cluster's nodes import `modules` (once per cluster), as a user
        would with `reference.init(preload=...)`: the first call starts the default cluster
        with them, so its node factory imports them once and every node forks warm."""
        if not modules:
            return
        reference = importlib.import_module("reference")
        if not reference.is_initialized():
            cluster = reference.init(preload=modules)
            self._preloaded = (cluster, set(modules))
            return
        cluster = reference.init(ignore_reinit_error=True)
        if self._preloaded[0] is not cluster:
            self._preloaded = (cluster, set())
        missing = [m for m in modules if m not in self._preloaded[1]]
        if missing:
            self._preloaded[1].update(missing)
            cluster.preload(missing, timeout_s=PRELOAD_TIMEOUT_S)

    def start_fit(self, make_trainer, deadline_s: float) -> FitHandle:
        return _ThreadFit(self, make_trainer, deadline_s)

    def reset(self) -> None:
        reference = importlib.import_module("reference")
        shutdown = getattr(reference, "shutdown", None)
        if shutdown is not None:
            shutdown()

    @contextlib.contextmanager
    def cluster(self, nodes: list[NodeSpec]):
        reference = importlib.import_module("reference")
        simcluster = importlib.import_module("simcluster")
        reference.shutdown()
        preload = reference.PRELOAD
        with simcluster.Cluster(nodes=[_node_spec(simcluster, n) for n in nodes],
                                preload=preload, provider=self.provider) as cluster:
            reference.init(address=cluster.address)
            try:
                yield _SimHandle(simcluster, cluster)
            finally:
                reference.shutdown()

    @contextlib.contextmanager
    def tpu_slices(self, slices):
        reference = importlib.import_module("reference")
        simcluster = importlib.import_module("simcluster")
        reference.shutdown()
        nodes = [spec for name, kind, topology in slices
                 for spec in simcluster.tpu_slice(name, kind, topology, cpus=1)]
        # TPU slices run JAX: the factory imports what a JaxTrainer asks its nodes for once,
        # before it forks them, where each node would import it on the fit's request
        jax = importlib.import_module("reference.train.v2.jax").JaxConfig().backend_cls
        with simcluster.Cluster(nodes=nodes, preload=reference.PRELOAD + jax.preload_modules,
                                provider=self.provider) as cluster:
            reference.init(address=cluster.address)
            try:
                yield _SimHandle(simcluster, cluster)
            finally:
                reference.shutdown()

    @staticmethod
    def node_id_function():
        return _node_id


def _node_spec(simcluster, n: NodeSpec):
    return simcluster.NodeSpec(cpus=n.cpus, gpus=n.gpus, tpus=n.tpus,
                               resources=dict(n.resources),
                               accelerator=n.accelerator if n.gpus else None)


class _SimHandle(ClusterHandle):
    def __init__(self, simcluster, cluster):
        self._sim, self._cluster = simcluster, cluster

    @property
    def nodes(self):
        return self._cluster.nodes

    def add_node(self, spec: NodeSpec):
        return self._cluster.add_node(_node_spec(self._sim, spec))

    def remove_node(self, node) -> None:
        self._cluster.remove_node(node, graceful=True)

    def kill_node(self, node) -> None:
        self._cluster.kill_node(node)

    def pause_node(self, node) -> None:
        self._cluster.pause_node(node)

    def resume_node(self, node) -> None:
        self._cluster.resume_node(node)

    def preempt_node(self, node, deadline_s: float) -> None:
        # simcluster sends the notice (`simcluster.worker.preemption()`) and kills the node
        # at the deadline with reason "preempted": the reference charges that exit to
        # FailureConfig.max_preemption_failures.
        self._run_now(self._sim.action("preempt_node", node=node.id, deadline_s=deadline_s))

    def fail_next_upload(self, rank: int) -> None:
        # The reference tags its Train workers with their rank and calls
        # simcluster.worker.before_upload() before staging a checkpoint; the armed fault
        # makes that call raise on the first upload of a worker tagged rank=<rank>.
        self._run_now(self._sim.action("fail_upload", worker=f"rank={rank}", error="OSError",
                                       message=f"injected upload failure (rank {rank})"))

    def _run_now(self, act) -> None:
        """Run a one-step plan and return once its step acted (the fault is armed or
        under way); a step the cluster skipped raises, naming why."""
        plan = self._sim.FaultPlan(steps=((self._sim.Trigger.after(0), act),))
        run = self._cluster.run_plan(plan)
        deadline = time.monotonic() + 10.0
        while not (run.injected or run.skipped) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not run.injected:
            why = run.skipped[0]["why"] if run.skipped else "it did not act within 10 s"
            raise RuntimeError(f"simcluster fault plan step {act} did not act: {why}")


def _node_id() -> str:
    import os

    return os.environ.get("SIMCLUSTER_NODE_ID", "node-0")
