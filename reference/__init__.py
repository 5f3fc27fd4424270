"""trainspec's reference implementation of the Ray Train API (`reference.train`, ...)."""

__version__ = "0.1.0"
