import importlib.util
import os
import sys

import pytest

# the helpers the framework folders share live one folder up
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from framework_fixtures import bounded, gbdt_cluster  # noqa: E402, F401 - bounded: autouse

# Without the xgboost extra these modules cannot even be imported: leave them out of
# collection, and let test_xgboost_installed.py report one skip that says why.
if importlib.util.find_spec("xgboost") is None:
    collect_ignore_glob = ["test_xgboost_[!i]*.py"]


@pytest.fixture(scope="module")
def xgboost_cluster():
    """Three CPUs whose workers fork with xgboost and this folder's training functions."""
    with gbdt_cluster("xgboost", "reference.train.xgboost", "xgboost_fns"):
        yield
