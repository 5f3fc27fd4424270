"""The reference implementation of ``ray.train.collective``: `barrier` and
`broadcast_from_rank_zero`, usable inside a training function."""

from reference.train.collective._collectives import barrier, broadcast_from_rank_zero

__all__ = ["broadcast_from_rank_zero", "barrier"]
