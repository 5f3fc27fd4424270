"""``ray.train.v2.api``: where Ray 2.60 defines its V2 trainer base class."""
