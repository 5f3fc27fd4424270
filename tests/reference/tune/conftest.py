"""Fixtures the Tune tests share: `cluster`, one reference cluster (2 CPUs) per module."""

from __future__ import annotations

import pytest

import reference


@pytest.fixture(scope="module")
def cluster():
    reference.shutdown()
    cluster = reference.init(num_cpus=2)
    yield cluster
    reference.shutdown()
