"""The accelerator probe asks the CUDA driver before it imports torch: a worker on a machine
without a CUDA device is spared torch's import (seconds per worker process)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conformance.accelerator_probe import cuda_driver_devices

CODE = ("import sys\nfrom conformance.accelerator_probe import real_cuda\n"
        "print(real_cuda(), 'torch' in sys.modules)\n")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_no_cuda_device_is_known_without_importing_torch():
    if cuda_driver_devices():
        pytest.skip("this machine has a CUDA device: torch answers")
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.split()) == (0, ["False", "False"]), done.stderr


def test_the_driver_count_honours_cuda_visible_devices():
    # no device is visible where CUDA_VISIBLE_DEVICES names none, whatever the machine has
    code = "from conformance.accelerator_probe import cuda_driver_devices as c; print(c())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin"})
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr
