import pytest
from torch_rank_pool import RankPool


@pytest.fixture(scope="session")
def rank_pool():
    """Four rank processes shared by the multi-process torch tests of this test process."""
    pool = RankPool(4)
    yield pool
    pool.close()
