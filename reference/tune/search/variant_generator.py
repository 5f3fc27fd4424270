"""Expanding a param_space into trial configs, as Ray's basic variant generator does.

`generate_variants(space)` yields `(resolved, config)` per variant: `resolved` maps each
resolved leaf's path (a tuple of keys) to its value, `config` is the space with every
`grid_search` marker and domain replaced. Grid searches multiply: one variant per
combination, the grids ordered by their paths (sorted, as Ray does) and the first varying
fastest. Within
each combination the domains are drawn (anew for every combination unless
`constant_grid_search`), then the `sample_from` functions, which see the config with
everything else resolved (and each other, in order).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any, Iterator

import numpy as np

from reference.tune.search.sample import Domain, Function

Path = tuple


def _leaves(space: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    if isinstance(space, dict):
        if set(space) == {"grid_search"}:
            yield path, space
            return
        for key, value in space.items():
            yield from _leaves(value, path + (key,))
    elif isinstance(space, (list, tuple)):
        for i, value in enumerate(space):
            yield from _leaves(value, path + (i,))
    else:
        yield path, space


def _set(config: Any, path: Path, value: Any) -> None:
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value


def _is_grid(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"grid_search"}


def generate_variants(space: dict, constant_grid_search: bool = False,
                      random_state=None) -> Iterator[tuple[dict, dict]]:
    if not isinstance(space, dict):
        raise TypeError(f"param_space={space!r}: expected a dict.")
    rng = random_state if isinstance(random_state, np.random.Generator) else \
        np.random.default_rng(random_state)
    leaves = list(_leaves(space))
    # Ray orders the grids by their paths (sorted), the first varying fastest
    grids = sorted(((p, v["grid_search"]) for p, v in leaves if _is_grid(v)),
                   key=lambda item: tuple((isinstance(k, str), k) for k in item[0]))
    domains = [(p, v) for p, v in leaves if isinstance(v, Domain) and not isinstance(v, Function)]
    functions = [(p, v) for p, v in leaves if isinstance(v, Function)]
    constant = {p: d.sample(random_state=rng) for p, d in domains} if constant_grid_search \
        else None
    # itertools.product varies its last iterable fastest; Ray's first grid varies fastest
    for combo in itertools.product(*[values for _, values in reversed(grids)]):
        config = copy.deepcopy(_without_domains(space))
        resolved: dict = {}
        for (path, _), value in zip(reversed(grids), combo, strict=True):
            _set(config, path, value)
            resolved[path] = value
        for path, domain in domains:
            value = constant[path] if constant is not None else domain.sample(random_state=rng)
            _set(config, path, value)
            resolved[path] = value
        for path, function in functions:
            value = function.sample(config=config, random_state=rng)
            _set(config, path, value)
            resolved[path] = value
        yield resolved, config


def _without_domains(space: Any) -> Any:
    """The space with domains and grid markers as None (deep-copyable placeholders)."""
    if isinstance(space, dict):
        if _is_grid(space):
            return None
        return {k: _without_domains(v) for k, v in space.items()}
    if isinstance(space, list):
        return [_without_domains(v) for v in space]
    if isinstance(space, tuple):
        return [_without_domains(v) for v in space]
    return None if isinstance(space, Domain) else space


def count_variants(space: dict) -> int:
    """Variants per sample: the product of the grid sizes."""
    sizes = [len(v["grid_search"]) for _, v in _leaves(space) if _is_grid(v)]
    return int(np.prod(sizes)) if sizes else 1
