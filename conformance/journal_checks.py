"""The journal checkers, shared with the reference's deterministic simulation: they live in
the neutral package `histories` (see histories/journal.py for the event format)."""

from histories.journal import (  # noqa: F401 - this module's API
    ALWAYS,
    Verdict,
    acknowledged_steps,
    attempts,
    checkpoints_whole,
    contiguous_per_node,
    ranks_complete,
    restores_latest,
    world_size_within,
)
