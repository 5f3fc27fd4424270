"""`preload(modules)`: a running cluster's nodes import modules once, for every worker after.

The probe module is written for the test (never imported by this process), so a worker can
only have it from its node: the supervisor imported it, and the fork carried it over."""

from __future__ import annotations

import sys
import textwrap

import pytest

import simcluster
from simcluster import NodeSpec


def _has(module: str) -> bool:
    import sys

    return module in sys.modules


@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    """A module that records each import: one line per importing process in a file."""
    name = f"preload_probe_{tmp_path.name.replace('-', '_')}"
    log = tmp_path / "imports.log"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        import os
        with open({str(log)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))  # the nodes take the driver's sys.path
    yield name, log
    sys.modules.pop(name, None)


def _imports(log) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_preloaded_module_reaches_every_later_worker_without_importing_again(
        make_cluster, probe_module):
    name, log = probe_module
    cluster = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    node_pids = {n.pid for n in cluster.nodes}
    assert not cluster.start_worker(cluster.nodes[0].id, _has, (name,)).wait(10).result
    assert cluster.preload([name]) == {}
    # Each supervisor imported it once before answering; the factory (for nodes still to
    # come) imports it too, in order before any later spawn but maybe after the answer.
    importers = _imports(log)
    assert node_pids <= {int(p) for p in importers} and len(importers) in (2, 3)
    for node in cluster.nodes:
        for _ in range(2):
            assert cluster.start_worker(node.id, _has, (name,)).wait(10).result is True
    assert len(_imports(log)) <= 3, "a worker imported the module itself"
    # A node added later starts from the factory, which has it: no import either.
    late = cluster.add_node(NodeSpec(cpus=1))
    assert cluster.start_worker(late.id, _has, (name,)).wait(10).result is True
    assert len(_imports(log)) == 3
    # Asking again costs no import, and the history holds the request once.
    assert cluster.preload([name]) == {}
    assert len(_imports(log)) == 3
    events = [e for e in cluster.history.events() if e["event"] == "preload"]
    assert [(e["modules"], e["nodes"]) for e in events] == [
        ([name], sorted(n.id for n in cluster.nodes[:2]))]


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[1])


def test_the_factory_imports_a_request_only_before_it_forks_a_node(make_cluster,
                                                                  probe_module):
    name, log = probe_module
    cluster = make_cluster(NodeSpec(cpus=1))
    node = cluster.nodes[0]
    factory = _parent(node.pid)  # nodes are forked from the factory
    assert cluster.preload([name]) == {}
    assert cluster.start_worker(node.id, _has, (name,)).wait(10).result is True
    # the factory was sent the request before the node answered it; no fork followed
    cluster.close()
    assert str(factory) not in _imports(log)
    assert _imports(log) == [str(node.pid)]


def test_a_client_may_ask_and_a_failed_import_is_reported_per_node(make_cluster):
    cluster = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1))
    client = simcluster.connect(cluster.address)
    try:
        failed = client.preload(["json", "no_such_module_for_preload"])
        assert sorted(failed) == sorted(n.id for n in cluster.nodes)
        for errors in failed.values():
            assert list(errors) == ["no_such_module_for_preload"]
            assert "ModuleNotFoundError" in errors["no_such_module_for_preload"]
        # The module that did import is there; the cluster still works.
        assert client.start_worker(cluster.nodes[1].id, _has, ("json",)).wait(10).result
        # A failure is remembered, not retried: the same answer at once.
        assert client.preload(["no_such_module_for_preload"]) == failed
    finally:
        client.close()


def test_a_module_that_cannot_be_imported_never_keeps_a_later_node_down(make_cluster):
    # A new node is forked from the factory after the request: even a module the factory
    # cannot import leaves the node up (the request is an optimization, never a failure).
    cluster = make_cluster(NodeSpec(cpus=1))
    cluster.preload(["no_such_module_for_preload"])
    node = cluster.add_node(NodeSpec(cpus=1))
    assert node.state == "up"
    done = cluster.start_worker(node.id, _has, ("json",)).wait(10)
    assert (done.code, done.result) == (0, True)


@pytest.mark.parametrize("bad", ["torch", [""], ["a b"], [1], None, ["torch", 2]])
def test_bad_module_lists_are_refused_naming_the_argument(make_cluster, bad):
    cluster = make_cluster(NodeSpec(cpus=1))
    with pytest.raises(TypeError, match=r"preload\(modules="):
        cluster.preload(bad)
