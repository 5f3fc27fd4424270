"""Adapters: how the suite reaches one implementation of the contract.

`load(name)` accepts a built-in name (`ray`, `reference`) or `module:factory` and returns
the adapter. `resolve(name)` does everything `load` does short of calling the factory (the
name is known, the module imports, the factory exists, a built-in's own dependency such as
Ray imports), so a command can refuse a bad `--impl` with one message before it starts any
work. Both raise, with a message that names `--impl`, the value, what is allowed and the fix:

- `ImplementationError` (a `ValueError`): the name is neither built in nor `module:factory`,
  or the module has no such factory;
- `ImportError` (of the type the import raised, e.g. `ModuleNotFoundError`): the module of
  a `module:factory`, or a built-in's dependency (Ray), does not import.

`LOAD_ERRORS` is the pair, for commands that turn either into a usage error.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable

from conformance.adapters.base import Adapter, ClusterHandle, NodeSpec, Outcome, Unsupported

BUILTIN = {
    "ray": "conformance.adapters.ray_adapter:RayAdapter",
    "reference": "conformance.adapters.reference_adapter:ReferenceAdapter",
}

#: what a built-in implementation needs importable, and how to get it
REQUIRES = {
    "ray": ("ray.train", 'pip install "trainspec[ray]"  (that is ray[train]==2.60.0)'),
}


class ImplementationError(ValueError):
    """Raised when `--impl` (or TRAINSPEC_IMPL) names no implementation that can be loaded."""


#: what `resolve` and `load` raise for a bad `--impl`
LOAD_ERRORS = (ImplementationError, ImportError)


def _import_error(exc: ImportError, message: str) -> ImportError:
    """`message` as an error of the same type as `exc` (callers may catch the type)."""
    try:
        return type(exc)(message, name=exc.name, path=exc.path)
    except TypeError:
        return ImportError(message, name=exc.name, path=exc.path)


def _allowed() -> str:
    names = [repr(n) for n in sorted(BUILTIN, key=lambda n: n != "reference")]
    return ", ".join(names[:-1]) + f", {names[-1]} or 'module:factory'"


def resolve(spec: str) -> Callable[[], Adapter]:
    """The factory `--impl=spec` names, after checking that it can be reached."""
    if not isinstance(spec, str) or not spec.strip():
        raise ImplementationError(f"--impl {spec!r}: expected {_allowed()}")
    target = BUILTIN.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImplementationError(
            f"--impl {spec!r}: no such implementation; expected {_allowed()} "
            "(e.g. --impl mypkg.adapter:make_adapter, or TRAINSPEC_IMPL=mypkg.adapter:make_adapter)"
        )
    if spec in REQUIRES:
        needed, fix = REQUIRES[spec]
        try:
            importlib.import_module(needed)
        except ImportError as exc:
            raise _import_error(exc, (
                f"--impl {spec!r}: {needed} cannot be imported ({type(exc).__name__}: {exc}); "
                f"install it with: {fix}")) from exc
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _import_error(exc, (
            f"--impl {spec!r}: cannot import module {module_name!r} "
            f"({type(exc).__name__}: {exc}); install it or put it on PYTHONPATH")) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ImplementationError(
            f"--impl {spec!r}: module {module_name!r} has no callable {attr!r}; expected a "
            "function or class that returns a conformance Adapter"
        )
    return factory


def load(spec: str) -> Adapter:
    """The adapter `--impl=spec` names (not yet set up)."""
    adapter = resolve(spec)()
    if not isinstance(adapter, Adapter):
        target = BUILTIN.get(spec, spec)
        raise TypeError(f"--impl {spec!r}: {target} returned {type(adapter).__name__}, not a "
                        "conformance Adapter; subclass conformance.adapters.Adapter")
    return adapter


def check_cluster_options(impl: str, sim_provider: str | None = None,
                          ray_address: str | None = None,
                          allow_node_faults: bool = False) -> None:
    """ValueError (naming the option, what it applies to and why) for `--sim-provider` or
    `--ray-address` given with the wrong `--impl`, `--allow-node-faults` without
    `--ray-address`, or a provider that cannot run here; the same check for
    `python -m conformance run`, `pytest conformance/` and the fault matrix."""
    from conformance.adapters.ray_adapter import RAY_ADDRESS_ENV

    if allow_node_faults and not (ray_address or os.environ.get(RAY_ADDRESS_ENV)):
        raise ValueError("--allow-node-faults applies to a cluster the suite joins: give "
                         "--ray-address ADDR too (on a local session or simcluster the "
                         "suite owns every node and always may fault them)")
    if ray_address and impl != "ray":
        raise ValueError(f"--ray-address {ray_address!r}: only --impl ray runs on a Ray "
                         f"cluster (this run: --impl {impl})")
    if sim_provider:
        from conformance.adapters.reference_adapter import check_sim_provider

        if impl != "reference":
            raise ValueError(f"--sim-provider {sim_provider!r}: only --impl reference runs on "
                             f"simcluster (this run: --impl {impl})")
        check_sim_provider(sim_provider)


__all__ = [
    "check_cluster_options","Adapter", "ClusterHandle", "NodeSpec", "Outcome", "Unsupported", "load", "resolve",
           "ImplementationError", "LOAD_ERRORS", "BUILTIN", "REQUIRES"]
