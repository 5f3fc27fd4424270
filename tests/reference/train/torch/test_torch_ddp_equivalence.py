"""Data parallelism changes nothing but speed: W ranks with DDP, each on 1/W of the global
batch, end with the weights one process gets on the full batch (float32 tolerance)."""

from __future__ import annotations

import pytest
import torch_rank_fns as fns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_rank_pool import make_slots

from reference.train.torch import TorchConfig

pytestmark = pytest.mark.slow
CONFIG = TorchConfig(backend="gloo", timeout_s=60)
# Absolute tolerance for float32 weights after a few steps: reductions in a different
# order differ by a few ulps per step, far below this.
ATOL, RTOL = 1e-5, 1e-4


def _compare(rank_pool, world_size, width, per_rank_batch, lr, epochs, steps, shuffle):
    __tracebackhide__ = True
    # A single worker keeps the loader's own RandomSampler, whose order no second process
    # can reproduce; shuffled equivalence is a statement about DistributedSampler.
    shuffle = shuffle and world_size > 1
    n = per_rank_batch * world_size * steps
    setting = (f"[world_size={world_size}, width={width}, per_rank_batch={per_rank_batch}, "
               f"lr={lr}, epochs={epochs}, n={n}, shuffle={shuffle}]")
    ranks = rank_pool.run(CONFIG, make_slots(world_size), fns.ddp_rank, width,
                          per_rank_batch, lr, epochs, n, 0, shuffle, timeout=90)
    expected = fns.single_process(width, per_rank_batch * world_size, lr, epochs, n, 0,
                                  shuffle)
    wrapper = "DistributedDataParallel" if world_size > 1 else "Sequential"
    assert {kind for kind, _ in ranks} == {wrapper}, setting
    errors = [fns.max_abs_error(weights, expected) for _, weights in ranks]
    scale = max(float(v.abs().max()) for v in expected.values())
    assert max(errors) <= ATOL + RTOL * scale, f"max abs error {max(errors):.3g} {setting}"
    return max(errors)


@pytest.mark.parametrize("world_size, shuffle", [(1, False), (2, False), (4, False),
                                                 (2, True), (4, True)])
def test_same_weights_as_one_process(rank_pool, world_size, shuffle):
    _compare(rank_pool, world_size, width=8, per_rank_batch=4, lr=0.1, epochs=2, steps=3,
             shuffle=shuffle)


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(world_size=st.sampled_from([1, 2, 4]), width=st.integers(1, 16),
       per_rank_batch=st.integers(1, 6), lr=st.floats(1e-3, 0.3), shuffle=st.booleans())
def test_property_over_width_batch_lr_and_world_size(rank_pool, world_size, width,
                                                     per_rank_batch, lr, shuffle):
    _compare(rank_pool, world_size, width, per_rank_batch, lr, epochs=1, steps=3,
             shuffle=shuffle)
