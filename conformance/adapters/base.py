"""The adapter interface: the only thing checks know about an implementation.

Checks reach the implementation's public namespace through `adapter.train`
(the module that plays `ray.train`) and run trainers through `adapter.fit`, which
enforces a deadline: a fit that does not finish in time is returned as a hang
(with the stacks the workers dumped), the implementation is reset, and the suite goes on.

Capabilities name optional powers (`multinode`, `add_node`, `remove_node`, `kill_node`,
`pause_node`, `preempt_node`, `fail_upload`, `elastic`); a check needing one an adapter lacks
is skipped with the reason printed.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from typing import Any, Callable


class Unsupported(Exception):
    """Raised by an adapter for a capability it lacks; the suite turns it into a skip."""


class SetupError(RuntimeError):
    """Raised by `Adapter.setup` when the implementation cannot be reached as configured
    (e.g. a cluster address nobody answers at); the message says why and what to do, and
    the suite ends with it as a usage error instead of failing every check."""


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    cpus: int = 2
    gpus: int = 0
    resources: dict = dataclasses.field(default_factory=dict)
    #: the GPUs' kind: None or "CUDA" (NVIDIA), "ROCm" (AMD)
    accelerator: str | None = None
    #: TPU chips (the "TPU" resource) on one host
    tpus: int = 0

    def custom_resources(self) -> dict:
        """The node's resources besides CPU and GPU, as Ray declares them (TPU included)."""
        return {**self.resources, **({"TPU": self.tpus} if self.tpus else {})}


@dataclasses.dataclass
class Outcome:
    """What one fit() did: a Result, or the exception it raised, or a hang."""

    result: Any = None
    error: BaseException | None = None
    elapsed_s: float = 0.0
    hang: bool = False
    stacks: str = ""
    #: the probe's journal folder of a fit that hung (None: not a probe run), read by the
    #: hang verdict to say which ranks had not reported
    journal_dir: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.hang


class ClusterHandle(abc.ABC):
    """A multi-node cluster the adapter started; nodes are opaque handles."""

    nodes: list

    @abc.abstractmethod
    def add_node(self, spec: NodeSpec) -> Any: ...

    @abc.abstractmethod
    def remove_node(self, node: Any) -> None: ...

    def kill_node(self, node: Any) -> None:
        self.remove_node(node)

    def pause_node(self, node: Any) -> None:
        raise Unsupported(f"{type(self).__name__} cannot pause a node")

    def resume_node(self, node: Any) -> None:
        raise Unsupported(f"{type(self).__name__} cannot resume a node")

    def preempt_node(self, node: Any, deadline_s: float) -> None:
        """Give the workers on `node` a preemption notice now and take the node away
        `deadline_s` seconds later, as a cloud reclaims a spot instance (capability
        "preempt_node"). Returns at once; the node goes at the deadline."""
        raise Unsupported(f"{type(self).__name__} cannot preempt a node (drain it with "
                          "notice); its cluster can only remove or kill one")

    def fail_next_upload(self, rank: int) -> None:
        """Make the next checkpoint upload of the worker with world rank `rank` fail with
        an OSError before anything reaches storage (capability "fail_upload"); later
        uploads, and those of other ranks, go through."""
        raise Unsupported(f"{type(self).__name__} cannot fail a checkpoint upload (it has "
                          "no hook between a worker and its storage)")


class FitHandle(abc.ABC):
    """A fit() started in the background (so a check can change the cluster meanwhile)."""

    @abc.abstractmethod
    def wait(self) -> Outcome: ...


class Adapter(abc.ABC):
    name: str = "abstract"
    capabilities: frozenset = frozenset()
    #: seconds a fit may take before it is a hang (checks may scale it)
    fit_deadline_s: float = 60.0
    #: Hypothesis examples for properties whose every example runs fit()
    fit_examples: int = 3
    #: seconds the fault schedules leave between a report and the next fault: the clause
    #: fault.restore-latest's 0.5 s; an implementation whose report returns only once the
    #: report is registered (fault.acknowledged-checkpoint) may leave less, which faults
    #: closer to each report
    report_settle_s: float = 0.5
    #: elastic_resize_monitor_interval_s of the elastic checks (how often a controller
    #: looks for room to grow; the checks observe a few intervals)
    elastic_interval_s: float = 2.0
    #: journal checkers (names in `conformance.journal_checks.ALWAYS`) run after every fit
    history_checks: tuple = ()

    # ------------------------------------------------------------ namespace
    @property
    @abc.abstractmethod
    def train(self):
        """The module that plays `ray.train`."""

    @property
    def DataParallelTrainer(self):  # noqa: N802 - mirrors the class name
        return self.train.DataParallelTrainer

    def framework(self, name: str):
        """A framework namespace beside `train`, e.g. framework("torch") plays
        `ray.train.torch`."""
        import importlib

        return importlib.import_module(f"{self.train.__name__}.{name}")

    @property
    def tune(self):
        """The module that plays `ray.tune`: `<root>.tune` (`ray.tune`, `reference.tune`)."""
        return self._beside_train("tune")

    @property
    def data(self):
        """The module that plays `ray.data`: `<root>.data`, root being the package above
        `train` (`ray.data` for `ray.train`, `reference.data` for `reference.train`)."""
        return self._beside_train("data")

    def _beside_train(self, name: str):
        import importlib

        root = self.train.__name__.rpartition(".")[0]
        if not root:
            raise Unsupported(f"adapter {self.name!r}: its train module "
                              f"{self.train.__name__!r} has no package to hold a {name} module")
        return importlib.import_module(f"{root}.{name}")

    @abc.abstractmethod
    def version(self) -> str: ...

    def describe(self) -> str:
        return f"{type(self).__module__}:{type(self).__name__}"

    # ------------------------------------------------------------ lifecycle
    def setup(self) -> None:
        """Start whatever the implementation needs (once per test session)."""

    def ensure_session(self) -> None:
        """Before each check that does not build a cluster of its own: start the default
        session (cluster) if none is up; by default it is up from setup() on."""

    def teardown(self) -> None:
        """Stop it."""

    def reset(self) -> None:
        """Throw away possibly poisoned state after a hang or a failed run."""

    # ------------------------------------------------------------ running
    @abc.abstractmethod
    def start_fit(self, make_trainer: Callable[[], Any], deadline_s: float) -> FitHandle:
        """Call make_trainer().fit() where the implementation's driver runs."""

    def fit(self, make_trainer: Callable[[], Any], deadline_s: float | None = None) -> Outcome:
        return self.start_fit(make_trainer, deadline_s or self.fit_deadline_s).wait()

    def cluster(self, nodes: list[NodeSpec]) -> ClusterHandle:
        """Replace the default cluster with one of the given nodes (a context manager)."""
        raise Unsupported(f"adapter {self.name!r} has no multi-node cluster")

    def accelerator_cluster(self, nodes: list[NodeSpec]) -> ClusterHandle:
        """A cluster with nodes like `nodes` for the accelerator checks (a context manager).
        By default the one `cluster(nodes)` builds, whose nodes are exactly `nodes`; an
        adapter joined to a cluster it does not own may instead yield that cluster as it
        is, when it already has such nodes, with a handle whose `existing` is True (its
        nodes have at least what was asked; their GPU ids need not start at 0)."""
        return self.cluster(nodes)

    def tpu_slices(self, slices: list[tuple[str, str, str]]) -> ClusterHandle:
        """Replace the default cluster with TPU slices, each (name, accelerator_type,
        topology) such as ("a", "TPU-V4", "2x2x2"), one node per host (a context manager).
        Capability "tpu_slices"; on the reference they are simulated (JAX computes on the
        CPU)."""
        raise Unsupported(f"adapter {self.name!r} has no TPU slices")

    @staticmethod
    def node_id_function() -> Callable[[], str] | None:
        """A picklable function that, on a worker, returns its node's id (None: unknown)."""
        return None


def require(impl, capability: str, hint: str | None = None) -> None:
    """Unsupported, naming the capability and why it is missing (`hint`, else the adapter's
    `capabilities_note`: one note for all, or {capability: note}), unless `impl` has it."""
    if capability in impl.capabilities:
        return
    why = hint or getattr(impl, "capabilities_note", "")
    if isinstance(why, dict):
        why = why.get(capability, "")
    raise Unsupported(f"adapter {impl.name!r} lacks the capability {capability!r}"
                      + (f": {why}" if why else ""))


def journal_dir_of(make_trainer: Callable[[], Any]) -> str | None:
    """The probe journal a trainer factory writes to (`scenarios.TrainerFactory`), if any."""
    return getattr(make_trainer, "journal_dir", None)


def timed(fn: Callable[[], Any]) -> Outcome:
    """Run fn in this thread, capturing its result or exception as an Outcome."""
    start = time.monotonic()
    try:
        result = fn()
    except BaseException as exc:  # noqa: BLE001 - the outcome carries it to the check
        return Outcome(error=exc, elapsed_s=time.monotonic() - start)
    return Outcome(result=result, elapsed_s=time.monotonic() - start)
