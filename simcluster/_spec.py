"""What a node is: `NodeSpec` (what the caller asks for) and `Node` (a node of a cluster).

Resources are logical, as in Ray: a node may declare more CPUs or GPUs than the machine has.
A node's resources are `CPU`, `GPU` (CUDA or ROCm devices), `TPU` (chips), one
`accelerator_type:<type>` unit when an accelerator type is given, and any custom resources.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

ACCELERATORS = ("CUDA", "ROCm", "TPU")
NODE_STATES = ("up", "paused", "down")
# Names a caller sets through dedicated fields, so a custom resource cannot shadow them.
_RESERVED = ("CPU", "GPU", "TPU")


def _check_count(name: str, value: Any, *, integral: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"NodeSpec({name}={value!r}): expected a number >= 0")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"NodeSpec({name}={value!r}): expected a finite number >= 0")
    if integral and value != int(value):
        raise ValueError(f"NodeSpec({name}={value!r}): expected a whole number of devices")


def _check_str_map(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError(f"NodeSpec({name}={value!r}): expected a mapping of str to str")


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """The resources and identity of one simulated node.

    `accelerator` defaults to "CUDA" when `gpus > 0` and to "TPU" when `tpus > 0`;
    `env` is added to the environment of every worker on the node; `labels` are carried
    through to `Node.labels` for schedulers that want them.
    """

    cpus: float = 1
    gpus: int = 0
    tpus: int = 0
    accelerator: str | None = None
    accelerator_type: str | None = None
    resources: Mapping[str, float] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_count("cpus", self.cpus, integral=False)
        _check_count("gpus", self.gpus, integral=True)
        _check_count("tpus", self.tpus, integral=True)
        accelerator = self.accelerator
        if accelerator is None:
            accelerator = "TPU" if self.tpus else ("CUDA" if self.gpus else None)
            object.__setattr__(self, "accelerator", accelerator)
        if accelerator not in (None, *ACCELERATORS):
            raise ValueError(
                f"NodeSpec(accelerator={accelerator!r}): expected one of {ACCELERATORS} or None"
            )
        if accelerator == "TPU" and self.gpus:
            raise ValueError(f"NodeSpec(gpus={self.gpus!r}) with accelerator='TPU': "
                             "declare TPU chips as `tpus=`")
        if accelerator in ("CUDA", "ROCm") and self.tpus:
            raise ValueError(f"NodeSpec(tpus={self.tpus!r}) with accelerator={accelerator!r}: "
                             "a node has one kind of accelerator")
        if self.accelerator_type is not None and not isinstance(self.accelerator_type, str):
            raise TypeError(f"NodeSpec(accelerator_type={self.accelerator_type!r}): "
                            "expected a str such as 'A100' or None")
        if not isinstance(self.resources, Mapping):
            raise TypeError(f"NodeSpec(resources={self.resources!r}): expected a mapping")
        for key, amount in self.resources.items():
            if not isinstance(key, str) or key in _RESERVED or not key:
                raise ValueError(f"NodeSpec(resources={dict(self.resources)!r}): key {key!r} "
                                 f"is not allowed; set {_RESERVED} through cpus/gpus/tpus")
            _check_count(f"resources[{key!r}]", amount, integral=False)
        _check_str_map("labels", self.labels)
        _check_str_map("env", self.env)
        # Frozen means frozen: take private copies of the mappings the caller passed.
        for name in ("resources", "labels", "env"):
            object.__setattr__(self, name, dict(getattr(self, name)))

    @property
    def device_resource(self) -> str | None:
        """The resource name this node's accelerator devices are counted in."""
        if self.accelerator == "TPU":
            return "TPU"
        return "GPU" if self.accelerator else None

    def total_resources(self) -> dict[str, float]:
        """The node's logical resources, as `Cluster.total_resources` counts them."""
        out: dict[str, float] = {"CPU": float(self.cpus)}
        if self.gpus:
            out["GPU"] = float(self.gpus)
        if self.tpus:
            out["TPU"] = float(self.tpus)
        if self.accelerator_type:
            out[f"accelerator_type:{self.accelerator_type}"] = 1.0
        for key, amount in self.resources.items():
            out[key] = float(amount)
        return out


@dataclasses.dataclass
class Node:
    """A node of a cluster. `state` is one of "up", "paused", "down" and changes in place
    on the cluster's own `Node` objects (snapshots from `simcluster.connect` do not)."""

    id: str
    index: int
    address: str
    spec: NodeSpec
    state: str = "up"
    pid: int | None = None

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.spec.labels)

    @property
    def resources(self) -> dict[str, float]:
        return self.spec.total_resources()

    def snapshot(self) -> Node:
        return dataclasses.replace(self)


def node_address(index: int) -> str:
    """A distinct loopback address per node (127.0.0.2, 127.0.0.3, ...): all of 127/8 routes
    to `lo` on Linux, and distinct addresses let callers group workers by node address."""
    host = index + 1  # 127.0.0.1 stays the driver's
    return f"127.{(host // 254) // 256}.{(host // 254) % 256}.{host % 254 + 1}"
