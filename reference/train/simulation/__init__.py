"""Deterministic simulation of a fit (an extension of the reference; Ray has none): the real
controller, checkpoint manager and storage code run against a simulated worker group, on an
in-memory file system and a virtual clock, while a scheduler decides the order of every
event and where faults land. `explore` runs every schedule up to a bound and checks each
history against `invariants`; `python -m reference.simulate` is its command line.
"""

from reference.train.simulation.explore import (
    explore,
    minimal_violation,
    parse_replay_id,
    replay_id,
    run_one,
)
from reference.train.simulation.variants import VARIANTS
from reference.train.simulation.world import Bounds, simulate

__all__ = ["VARIANTS", "Bounds", "explore", "minimal_violation", "parse_replay_id",
           "replay_id", "run_one", "simulate"]
