"""A simulated multi-node cluster on one machine, with fault injection and a history."""

__version__ = "0.1.0"
