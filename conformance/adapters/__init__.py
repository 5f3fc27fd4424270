"""Adapters: how the suite reaches one implementation of the contract.

`load(name)` accepts a built-in name (`ray`, `reference`) or `module:factory`.
"""

from __future__ import annotations

import importlib

from conformance.adapters.base import Adapter, ClusterHandle, NodeSpec, Outcome, Unsupported

BUILTIN = {
    "ray": "conformance.adapters.ray_adapter:RayAdapter",
    "reference": "conformance.adapters.reference_adapter:ReferenceAdapter",
}


def load(spec: str) -> Adapter:
    target = BUILTIN.get(spec, spec)
    if ":" not in target:
        raise ValueError(
            f"--impl={spec!r}: expected one of {sorted(BUILTIN)} or 'module:factory' "
            "(e.g. TRAINSPEC_IMPL=mypkg.adapter:make_adapter)"
        )
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    adapter = factory()
    if not isinstance(adapter, Adapter):
        raise TypeError(f"{target} returned {type(adapter).__name__}, not a conformance Adapter")
    return adapter


__all__ = ["Adapter", "ClusterHandle", "NodeSpec", "Outcome", "Unsupported", "load", "BUILTIN"]
