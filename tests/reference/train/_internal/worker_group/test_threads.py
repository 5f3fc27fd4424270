"""A worker's OpenMP thread count follows its CPUs, as Ray sets it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reference.train._internal.worker_group import threads


@pytest.mark.parametrize("resources, count", [({"CPU": 1}, 1), ({"CPU": 2.7}, 2),
                                              ({"CPU": 0.5}, 1), ({"GPU": 1}, 1),
                                              ({"CPU": 8}, 8)])
def test_the_count_is_the_floor_of_the_cpus_and_at_least_one(resources, count):
    assert threads.thread_count(resources) == count


def _run(code: str, env_extra: dict) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=True).stdout.strip()


def test_runtimes_loaded_before_are_limited_too():
    # torch loads its OpenMP runtime (reading the then-unset variable) before apply().
    code = ("import torch\nbefore = torch.get_num_threads()\n"
            "from reference.train._internal.worker_group import threads\n"
            "threads.apply({'CPU': 1})\n"
            "import os\nprint(before > 1 or os.cpu_count() == 1, torch.get_num_threads(),"
            " os.environ['OMP_NUM_THREADS'], bool(threads.loaded_openmp_runtimes()))")
    pytest.importorskip("torch")
    assert _run(code, {}) == "True 1 1 True"


def test_a_variable_the_user_set_is_left_alone():
    code = ("from reference.train._internal.worker_group import threads\n"
            "import os\nprint(threads.apply({'CPU': 1}), os.environ['OMP_NUM_THREADS'])")
    assert _run(code, {"OMP_NUM_THREADS": "3"}) == "None 3"
