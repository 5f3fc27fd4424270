"""The public surface of `reference.data`: `__all__`, and every name and parameter a subset
of Ray Data 2.60's (a program written for `ray.data` that uses them runs unchanged)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types

import pytest

import reference.data as data
from reference.data import collate_fn

#: reference.data's own parameters that Ray lacks (none)
EXTRA: dict[str, set] = {}


@pytest.fixture(scope="module")
def ray_data():
    return pytest.importorskip("ray.data")


def test_all_lists_exactly_the_public_names():
    public = {n for n, o in vars(data).items()
              if not n.startswith("_") and not isinstance(o, types.ModuleType)}
    assert sorted(data.__all__) == sorted(public)


def test_importing_the_data_layer_imports_neither_torch_nor_ray():
    code = ("import sys, reference.data; "
            "sys.exit(any(m.split('.')[0] in ('ray', 'torch') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def _params(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


@pytest.mark.parametrize("name", sorted(data.__all__))
def test_names_and_parameters_are_rays(ray_data, name):
    ours, theirs = getattr(data, name), getattr(ray_data, name)
    if inspect.isfunction(ours):
        assert set(_params(ours)) <= set(_params(theirs)), name
        return
    for attr, value in vars(ours).items():
        if attr.startswith("_") or not callable(value):
            continue
        assert hasattr(theirs, attr), f"{name}.{attr}: Ray has no such attribute"
        if inspect.isfunction(value):
            missing = set(_params(value)) - set(_params(getattr(theirs, attr)))
            assert missing <= EXTRA.get(f"{name}.{attr}", set()), (name, attr, missing)


@pytest.mark.parametrize("name", collate_fn.__all__)
def test_collate_classes_are_rays(ray_data, name):
    import ray.data.collate_fn as ray_collate

    assert hasattr(ray_collate, name)
