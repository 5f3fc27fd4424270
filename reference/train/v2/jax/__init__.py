"""The reference implementation of ``ray.train.v2.jax``: JaxTrainer and JaxConfig.

As in Ray, importing this package does not import jax (a missing jax fails on the
workers). The only import path is ``reference.train.v2.jax``, as Ray's is
``ray.train.v2.jax``.
"""

from reference.train.v2.jax._config import JaxConfig
from reference.train.v2.jax._trainer import JaxTrainer

__all__ = ["JaxConfig", "JaxTrainer"]
