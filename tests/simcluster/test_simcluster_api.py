"""The public surface: `__all__` lists exactly the public names, and both cluster kinds
offer the `ClusterLike` interface."""

from __future__ import annotations

import inspect

import simcluster
import simcluster.checkers
import simcluster.worker
from simcluster.api import ClusterLike


def public(module):
    return sorted(n for n in vars(module) if not n.startswith("_")
                  and not inspect.ismodule(getattr(module, n)) and n != "annotations")


def test_all_matches_public_names():
    for module in (simcluster, simcluster.worker, simcluster.checkers):
        assert sorted(module.__all__) == public(module), module.__name__


def test_exceptions_form_one_tree():
    for name in simcluster.__all__:
        obj = getattr(simcluster, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, simcluster.SimclusterError), name
    assert issubclass(simcluster.PlacementTimeout, TimeoutError)
    assert issubclass(simcluster.PlacementTimeout, simcluster.Unschedulable)
    assert issubclass(simcluster.ChannelClosed, EOFError)


def test_cluster_and_client_have_the_same_interface():
    members = [n for n in dir(ClusterLike) if not n.startswith("_")]
    for cls in (simcluster.Cluster, simcluster.ClusterClient):
        for name in members:
            assert hasattr(cls, name) or name == "address", (cls.__name__, name)
        for name in ("start_worker", "place", "remove_node"):
            ours = inspect.signature(getattr(simcluster.Cluster, name))
            theirs = inspect.signature(getattr(cls, name))
            assert list(ours.parameters) == list(theirs.parameters), (cls.__name__, name)


def test_worker_api_outside_a_worker_says_where_it_works():
    import pytest

    with pytest.raises(RuntimeError, match="start_worker"):
        simcluster.worker.current()
    with pytest.raises(RuntimeError):
        simcluster.worker.channel()


def test_simcluster_imports_neither_ray_nor_reference():
    import subprocess
    import sys

    code = ("import sys, simcluster, simcluster.api, simcluster.checkers, simcluster.worker; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'reference')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
