"""Checking what a `start_worker` call asks for, for `Cluster` and `ClusterClient` alike."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from .._wire import dumps
from .endpoint import Bundle, Placement


def blob_for(fn: Callable, args: tuple, kwargs: Mapping) -> bytes:
    """The pickled call a worker runs; fails here, in the caller, if it cannot be pickled."""
    if not callable(fn):
        raise TypeError(f"start_worker(fn={fn!r}): expected a callable")
    try:
        return dumps((fn, tuple(args), dict(kwargs)))
    except Exception as exc:
        raise TypeError(f"start_worker(fn={fn!r}): the call cannot be pickled: {exc!r}") from exc


_START_KEYS = ("node_id", "args", "kwargs", "env", "bundle", "placement", "name", "tags")


def bulk_starts(fn: Callable, starts: Sequence[Mapping]) -> tuple[bytes, list[tuple]]:
    """`start_workers(fn, starts)`: `fn` pickled once, and per start (node id, the pickled
    (args, kwargs), env, bundle, name, tags), checked as `start_worker` checks its own."""
    if not callable(fn):
        raise TypeError(f"start_workers(fn={fn!r}): expected a callable")
    try:
        fn_blob = dumps(fn)
    except Exception as exc:
        raise TypeError(f"start_workers(fn={fn!r}): it cannot be pickled: {exc!r}") from exc
    out = []
    for i, start in enumerate(starts):
        if not isinstance(start, Mapping) or set(start) - set(_START_KEYS):
            raise TypeError(f"start_workers(starts[{i}]={start!r}): expected a mapping with "
                            f"keys among {_START_KEYS}")
        node_id, bundle = resolve_target(start.get("node_id"), start.get("bundle"),
                                         start.get("placement"))
        call = (tuple(start.get("args", ())), dict(start.get("kwargs") or {}))
        try:
            blob = dumps(call)
        except Exception as exc:
            raise TypeError(f"start_workers(starts[{i}]): its args cannot be pickled: "
                            f"{exc!r}") from exc
        out.append((node_id, blob, check_env(start.get("env")), bundle, start.get("name"),
                    check_tags(start.get("tags"))))
    return fn_blob, out


def resolve_target(node_id: object, bundle: object, placement: object) -> tuple[str, Bundle | None]:
    """The node and bundle a `start_worker` call means, with errors naming the argument."""
    if isinstance(bundle, int) and not isinstance(bundle, bool):
        if not isinstance(placement, Placement):
            raise ValueError(f"start_worker(bundle={bundle!r}): a bundle index needs "
                             "`placement=`; or pass `bundle=placement[i]`")
        if not 0 <= bundle < len(placement):
            raise ValueError(f"start_worker(bundle={bundle!r}): the placement has "
                             f"{len(placement)} bundles")
        bundle = placement[bundle]
    elif bundle is not None and not isinstance(bundle, Bundle):
        raise TypeError(f"start_worker(bundle={bundle!r}): expected placement[i], an index "
                        "with `placement=`, or None")
    node_id = getattr(node_id, "id", node_id)
    if bundle is not None:
        if node_id is None:
            node_id = bundle.node_id
        elif node_id != bundle.node_id:
            raise ValueError(f"start_worker(node_id={node_id!r}): the bundle is on "
                             f"{bundle.node_id!r}; pass node_id=None to use the bundle's node")
    if not isinstance(node_id, str):
        raise ValueError(f"start_worker(node_id={node_id!r}): expected a node id (or a Node, "
                         "or None with a bundle)")
    return node_id, bundle


_SCALAR = (str, int, float, bool)
#: Fields every history event has; a recorded event may not set them.
_RESERVED = frozenset({"t", "seq", "event"})


def check_tags(tags: object) -> dict:
    """`start_worker(tags=...)`: str keys, scalar values (fault plans select workers by them)."""
    if tags is None:
        return {}
    if not isinstance(tags, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, _SCALAR) for k, v in tags.items()):
        raise TypeError(f"start_worker(tags={tags!r}): expected a mapping of non-empty str to "
                        "str, int, float or bool")
    return dict(tags)


def check_event(name: object, fields: Mapping) -> None:
    """`record_event(name, **fields)`: a dotted name of the caller's own namespace (so it can
    never be mistaken for one of simcluster's events) and JSON-able fields."""
    if not isinstance(name, str) or "." not in name.strip(".") or not name.isprintable() \
            or " " in name:
        raise ValueError(f"record_event(name={name!r}): expected a dotted name of your own "
                         "namespace, e.g. 'train.report' (simcluster's own events have no dot)")
    reserved = sorted(_RESERVED & set(fields))
    if reserved:
        raise ValueError(f"record_event({name!r}, ...): field(s) {reserved} are set by the "
                         "history itself")
    try:
        json.dumps(dict(fields))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"record_event({name!r}, ...): the fields must be JSON-able: "
                        f"{exc}") from None


def check_modules(modules: object) -> list[str]:
    """`preload(modules)`: a sequence of dotted module names (a single str is refused: it
    would be read as its letters)."""
    if isinstance(modules, (str, bytes)) or not isinstance(modules, Sequence) or not all(
            isinstance(m, str) and m and all(part.isidentifier() for part in m.split("."))
            for m in modules):
        raise TypeError(f"preload(modules={modules!r}): expected a list or tuple of dotted "
                        "module names, e.g. ['torch', 'mypackage.train']")
    return list(dict.fromkeys(modules))


def check_env(env: object) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError(f"start_worker(env={env!r}): expected a mapping of str to str")
    return dict(env)
