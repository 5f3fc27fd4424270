"""``ray.train.v2``'s namespace for the trainers Ray ships only there: `v2.jax`."""
