"""A worker serves the backend's calls while its training function runs, as a Ray actor
serves method calls beside its training thread (Backend.on_shutdown reaches a rank that has
not returned, e.g. when the controller fails)."""

from __future__ import annotations

import os
import time

import pytest

import reference
import simcluster
from reference.train._internal.worker_group.api import Finished, GroupSpec
from reference.train._internal.worker_group.simcluster_factory import SimclusterGroupFactory
from reference.train.backend import Backend

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {DEADLINE_S} s")
        time.sleep(0.02)


def _train(folder: str):
    """Say it runs, then stay inside the function until the test lets it return."""
    from reference import train

    rank = train.get_context().get_world_rank()
    open(os.path.join(folder, f"running-{rank}"), "w").close()
    _wait_for(os.path.join(folder, "release"))
    return rank


def _probe(folder: str) -> tuple:
    """Run as a backend call: this worker's pid, and whether its training function runs."""
    from reference import train

    rank = train.get_context().get_world_rank()
    running = os.path.exists(os.path.join(folder, f"running-{rank}"))
    return os.getpid(), running


def test_a_call_is_served_while_the_training_function_runs(tmp_path):
    folder = str(tmp_path)
    spec = GroupSpec(num_workers=2, resources_per_worker={"CPU": 1}, placement_strategy="PACK",
                     attempt=0, experiment_name="calls", storage=None,
                     staging_prefix=str(tmp_path / "stage"),
                     train_fn=simcluster.dumps_by_value(lambda: _train(folder)))
    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2)],
                            preload=reference.PRELOAD) as cluster:
        group = SimclusterGroupFactory(cluster, Backend()).start(spec)
        try:
            for rank in range(2):
                _wait_for(os.path.join(folder, f"running-{rank}"))
            futures = group.execution.execute_async(_probe, folder)
            answers = reference.get(futures, timeout=DEADLINE_S)
            pids = [w.metadata.pid for w in group.execution.get_workers()]
            assert answers == [(pids[0], True), (pids[1], True)]
            assert group.finished == set()  # neither rank has returned
            open(os.path.join(folder, "release"), "w").close()
            events = [group.next_event(DEADLINE_S) for _ in range(2)]
            assert sorted(e.value for e in events if isinstance(e, Finished)) == [0, 1], events
        finally:
            group.shutdown()
