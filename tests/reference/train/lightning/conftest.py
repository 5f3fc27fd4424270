import importlib.util
import os
import sys

import pytest

# the helpers both framework folders share live one folder up
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from framework_fixtures import driver_left_as_found, preloaded_cluster  # noqa: E402

# Without the lightning extra these modules cannot even be imported: leave them out of
# collection, and let test_lightning_installed.py report one skip that says why.
if importlib.util.find_spec("lightning") is None and importlib.util.find_spec(
        "pytorch_lightning") is None:
    collect_ignore_glob = ["test_lightning_[!i]*.py"]


@pytest.fixture(scope="module")
def lightning_cluster():
    """A one-node cluster whose supervisors imported Lightning once (workers fork with it)."""
    with preloaded_cluster("lightning.pytorch", "reference.train.lightning", "lightning_fns") as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _driver_left_as_found():
    with driver_left_as_found():
        yield
