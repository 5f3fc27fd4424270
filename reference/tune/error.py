"""`TuneError`: what Tune raises for a bad experiment setup (Ray's `ray.tune.error`)."""


class TuneError(Exception):
    """General error class raised by the reference's Tune."""
