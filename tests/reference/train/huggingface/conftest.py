import importlib.util
import os
import sys

import pytest

# the helpers both framework folders share live one folder up
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from framework_fixtures import driver_left_as_found, preloaded_cluster  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Without the transformers extra these modules cannot even be imported: leave them out of
# collection, and let test_transformers_installed.py report one skip that says why.
if importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_transformers_[!i]*.py", "test_accelerate_*.py"]


@pytest.fixture(scope="module")
def hf_cluster():
    """A one-node cluster whose supervisors imported transformers once."""
    with preloaded_cluster("transformers", "transformers.trainer", "accelerate",
                           "reference.train.huggingface.transformers", "transformers_fns") as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _driver_left_as_found():
    with driver_left_as_found():
        yield
