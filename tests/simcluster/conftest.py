"""Helpers for the multi-process simcluster tests: clusters that always close, deadlines."""

from __future__ import annotations

import pytest

from simcluster import Cluster, NodeSpec


@pytest.fixture
def make_cluster(tmp_path):
    """Factory for clusters closed at the end of the test, whatever happens."""
    made = []

    def make(*specs, **kwargs):
        kwargs.setdefault("history_path", tmp_path / f"history-{len(made)}.jsonl")
        cluster = Cluster(nodes=list(specs) or [NodeSpec(cpus=2)], **kwargs)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster per module for tests that inject no node faults."""
    path = tmp_path_factory.mktemp("shared") / "history.jsonl"
    cluster = Cluster(nodes=[
        NodeSpec(cpus=4),
        NodeSpec(cpus=2, gpus=2, accelerator_type="A100", env={"NODE_FLAVOUR": "cuda"}),
        NodeSpec(cpus=2, gpus=2, accelerator="ROCm"),
        NodeSpec(cpus=2, tpus=4, accelerator_type="TPU-V4"),
    ], history_path=path)
    yield cluster
    cluster.close()
