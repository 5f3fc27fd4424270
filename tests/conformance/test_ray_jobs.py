"""After a fit that raised, the Ray adapter keeps its session only when every resource came
back (`conformance.adapters.ray_jobs`): the rule on made-up numbers, and on a real local
session a held CPU that release cannot give back (a detached actor's, which the release
leaves alone as it leaves Ray's own services)."""

from __future__ import annotations

import pytest

from conformance.adapters.ray_jobs import _free


def test_free_names_each_resource_still_held_and_ignores_memory_and_group_entries():
    total = {"CPU": 4.0, "GPU": 2.0, "memory": 1e9, "object_store_memory": 1e8,
             "node:127.0.0.1": 1.0, "CPU_group_ab12": 2.0, "accelerator_type:A100": 1.0}
    available = {"CPU": 2.0, "GPU": 2.0, "memory": 1.0, "accelerator_type:A100": 1.0}
    assert _free(total, available) == ["CPU 2/4"]
    assert _free(total, {**available, "CPU": 4.0}) == []
    assert _free({"TPU": 4.0}, {}) == ["TPU 0/4"]


@pytest.mark.slow
def test_a_session_is_kept_when_the_resources_came_back_and_not_when_one_is_held(capsys):
    ray = pytest.importorskip("ray")
    from conformance.adapters.ray_jobs import released

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    try:
        @ray.remote(num_cpus=1)
        class Holder:
            def ping(self):
                return 1

        owned = Holder.remote()  # this job's, ending with its last handle as a fit's actors do
        assert ray.get(owned.ping.remote(), timeout=60) == 1
        del owned
        assert released(timeout_s=30.0)
        assert ray.available_resources().get("CPU") == 2.0
        held = Holder.options(lifetime="detached", name="held").remote()
        assert ray.get(held.ping.remote(), timeout=60) == 1
        assert not released(timeout_s=1.0)
        assert "a fresh session after a failed fit: CPU 1/2 still held after 1 s" in \
            capsys.readouterr().err
    finally:
        ray.shutdown()
