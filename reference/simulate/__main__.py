"""python -m reference.simulate --workers N --faults K --reports R [--seed S --runs N |
--replay ID] [--variant NAME] [--list-variants]

Explores every schedule of a simulated fit up to the bounds (or `--runs` random ones from
`--seed`, or replays one), checks each history against the invariants, prints each
violation found with the minimal schedule that shows it and the command that replays it,
and ends with `explored S schedules, V violations in T s`. Exit status 1 on a violation,
2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys

from reference.train.simulation import (
    VARIANTS,
    Bounds,
    explore,
    minimal_violation,
    parse_replay_id,
    replay_id,
    run_one,
)
from reference.train.simulation.explore import random_runs
from reference.train.simulation.world import ReplayError

PROG = "python -m reference.simulate"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[1])
    p.add_argument("--workers", type=int, default=2, help="ranks (default: 2)")
    p.add_argument("--faults", type=int, default=1, help="faults at most (default: 1)")
    p.add_argument("--reports", type=int, default=2, help="report rounds (default: 2)")
    p.add_argument("--max-failures", type=int, default=1,
                   help="FailureConfig(max_failures) (default: 1)")
    p.add_argument("--max-preemption-failures", type=int, default=-1,
                   help="FailureConfig(max_preemption_failures) (default: -1, unlimited)")
    p.add_argument("--ranks-per-node", type=int, default=2,
                   help="ranks on one node, for node loss (default: 2)")
    p.add_argument("--keep", type=int, default=None, metavar="K",
                   help="CheckpointConfig(num_to_keep=K) with a score per round (default: "
                        "keep every checkpoint)")
    p.add_argument("--no-reduction", action="store_true",
                   help="offer every rank's progress at every point (to measure what the "
                        "reduction removes)")
    p.add_argument("--no-states", action="store_true",
                   help="run every schedule to its end, without merging the runs that reach "
                        "the same state (to measure what that saves)")
    p.add_argument("--seed", type=int, default=None,
                   help="schedules drawn by Hypothesis from this seed instead of all of them; "
                        "a violation is shrunk")
    p.add_argument("--runs", type=int, default=1000, help="with --seed: how many (1000)")
    p.add_argument("--replay", metavar="ID", help="run the one schedule a violation printed")
    p.add_argument("--variant", choices=sorted(VARIANTS),
                   help="run a named broken variant of the reference instead")
    p.add_argument("--list-variants", action="store_true",
                   help="print the variants' names on one line and exit")
    return p


def _bounds(args, parser) -> Bounds:
    for name in ("workers", "reports", "ranks_per_node"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be >= 1")
    if args.faults < 0:
        parser.error(f"--faults {args.faults}: must be >= 0")
    for name in ("max_failures", "max_preemption_failures"):
        if getattr(args, name) < -1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be -1 "
                         "(unlimited) or >= 0")
    if args.keep is not None and args.keep < 1:
        parser.error(f"--keep {args.keep}: must be >= 1 (num_to_keep)")
    return Bounds(keep=args.keep, workers=args.workers, reports=args.reports, faults=args.faults,
                  max_failures=args.max_failures,
                  max_preemption_failures=args.max_preemption_failures,
                  ranks_per_node=args.ranks_per_node,
                  reduce=not args.no_reduction)


def _command(bounds: Bounds, choices: tuple, variant: str | None) -> str:
    return (f"{PROG} --replay {replay_id(bounds, choices)}"
            + (f" --variant {variant}" if variant else ""))


def _show(violation, variant: str | None) -> None:
    bounds = violation.fit.world.bounds
    print(f"VIOLATION {violation.lines[0]}")
    for line in violation.lines[1:]:
        print(f"  also: {line}")
    faults = [h for h in violation.fit.world.history
              if any(mark in h for mark in (" dies", " is lost", " is preempted", " fails"))]
    print(f"  schedule ({violation.size} event(s) off the default order): "
          + ("; ".join(faults) or "no fault, the default order"))
    print(f"  replay: {_command(bounds, violation.choices, variant)}")


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list_variants:
        print(" ".join(sorted(VARIANTS)))
        return 0
    if args.replay:
        try:
            bounds, choices = parse_replay_id(args.replay)
            fit, lines = run_one(bounds, choices, args.variant)
        except (ValueError, ReplayError) as exc:
            parser.error(str(exc))
        print("\n".join(fit.world.history))
        for line in lines:
            print(f"VIOLATION {line}")
        print(f"explored 1 schedules, {1 if lines else 0} violations in 0.0 s")
        return 1 if lines else 0
    bounds = _bounds(args, parser)
    if args.seed is not None:
        result = random_runs(bounds, args.seed, args.runs, args.variant)
    else:
        result = explore(bounds, args.variant, states=not args.no_states)
    print(f"bounds: {args.workers} workers, {args.reports} reports, <= {args.faults} faults, "
          f"max_failures={args.max_failures}"
          + (f", num_to_keep={args.keep}" if args.keep is not None else "")
          + (f"; variant {args.variant}" if args.variant else ""))
    if result.violations:
        smallest = minimal_violation(bounds, args.variant) if args.seed is None \
            else result.violations[0]
        _show(smallest, args.variant)
    rate = result.covered / result.seconds if result.seconds else 0.0
    if args.seed is not None:
        print(f"{result.schedules} schedules drawn by Hypothesis from seed {args.seed}"
              + (", the violation shrunk" if result.violations else ""))
    elif result.states:
        print(f"{result.schedules} runs, {result.states} states ({result.pruned} runs ended "
              f"at a state already explored), {result.choice_points} choice points")
    else:
        print(f"{result.schedules} runs, no state caching, {result.choice_points} choice "
              "points")
    print(f"{rate:.0f} schedules/s")
    print(f"explored {result.covered} schedules, {len(result.violations)} violations in "
          f"{result.seconds:.1f} s")
    return 1 if result.violations else 0


if __name__ == "__main__":
    sys.exit(main())
