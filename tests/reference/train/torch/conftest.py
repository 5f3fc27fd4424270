import importlib.util

import pytest
from torch_rank_pool import RankPool

# Without the torch extra these modules cannot even be imported: leave them out of
# collection, and let test_torch_installed.py report one skip that says why.
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_torch_[!i]*.py"]


@pytest.fixture(scope="session")
def rank_pool():
    """Four rank processes shared by the multi-process torch tests of this test process."""
    pool = RankPool(4)
    yield pool
    pool.close()
