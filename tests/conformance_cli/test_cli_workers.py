"""`python -m conformance run --workers`: how many pytest-xdist processes split the checks
(file by file). 'auto' splits the reference's checks over the CPUs (at most 4) and leaves
any other implementation, the netns and docker providers, and pytest arguments that choose
for themselves, in one process."""

from __future__ import annotations

import importlib.util
import os

import pytest

from conformance.__main__ import AUTO_WORKERS_MAX, _workers

XDIST = importlib.util.find_spec("xdist") is not None


@pytest.mark.skipif(not XDIST, reason="pytest-xdist not installed")
def test_auto_splits_the_reference_over_the_cpus():
    assert _workers("auto", "reference", []) == min(os.cpu_count() or 1, AUTO_WORKERS_MAX)
    assert _workers("3", "reference", []) == 3


def test_auto_is_one_process_for_other_implementations_and_chosen_arguments():
    assert _workers("auto", "ray", []) == 1
    assert _workers("auto", "my.module:make", []) == 1
    assert _workers("auto", "reference", [], provider="docker") == 1
    assert _workers("auto", "reference", [], provider="netns") == 1
    for args in (["-n", "3"], ["-n3"], ["--dist=load"], ["-p", "no:xdist"]):
        assert _workers("auto", "reference", args) == 1, args


@pytest.mark.parametrize("value", ["0", "-1", "two", ""])
def test_a_bad_count_is_refused_naming_the_option(value):
    with pytest.raises(ValueError, match=r"^--workers .*: expected 'auto' or a whole number"):
        _workers(value, "reference", [])


@pytest.mark.skipif(not XDIST, reason="pytest-xdist not installed")
def test_a_count_beside_pytests_own_choice_is_refused():
    with pytest.raises(ValueError, match=r"^--workers 2: the pytest arguments already choose"):
        _workers("2", "reference", ["-n", "4"])
