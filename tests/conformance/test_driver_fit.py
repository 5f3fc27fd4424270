"""A local-mode fit of the framework checks runs in the driver and leaves it as it found it:
Lightning sets OMP_NUM_THREADS there (to the CPUs per process) where it is unset, and every
cluster this driver started afterwards would hand that to its workers."""

from __future__ import annotations

import os

import pytest

from conformance.checks.check_lightning import DriverFit

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # imports torch


class _Trainer:
    def fit(self):
        os.environ.update(OMP_NUM_THREADS="7", RANK="0")
        return "fitted"


def test_the_driver_gets_back_the_variables_a_framework_set(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert DriverFit(_Trainer, str(tmp_path))().fit() == "fitted"
    assert ("OMP_NUM_THREADS" in os.environ, "RANK" in os.environ) == (False, False)
