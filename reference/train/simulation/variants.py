"""Broken variants of the reference, shipped (as the fake worker group is) so that the
simulator's own tests, and anyone checking that it catches a bug, can run it on them:
`python -m reference.simulate --variant NAME`. Each is the real code with one rule broken.
"""

from __future__ import annotations

from reference.train._internal.controller.controller import Controller
from reference.train._internal.controller.policies import FailurePolicy
from reference.train._internal.storage.checkpoint_manager import CheckpointManager
from reference.train._internal.worker_group.api import Ack


class AckBeforeCommit(Controller):
    """Acknowledges a round to its ranks before committing its checkpoint: a commit that
    then fails loses a checkpoint the ranks were told is safe."""

    def _on_report(self, state, report):
        arrived = state.rounds.get(report.index, {})
        if report.rank not in arrived and len(arrived) + 1 == state.size and report.staged:
            from reference.train._checkpoint import Checkpoint

            name = report.checkpoint_dir_name or "checkpoint"
            planned = Checkpoint(self.spec["storage"].build_checkpoint_path_from_name(name),
                                 filesystem=self.spec["storage"].storage_filesystem)
            for rank in [*arrived, report.rank]:
                state.group.ack(rank, Ack(report.index, planned))
        return super()._on_report(state, report)


class RestoreOldest(CheckpointManager):
    """Gives a restarted group the oldest checkpoint kept instead of the latest."""

    @property
    def latest_checkpoint(self):
        records = self.checkpoint_results
        return self.checkpoint_of(records[0]) if records else None


class ChargeTwice(FailurePolicy):
    """Charges every worker-group failure twice against max_failures."""

    def decide(self, kind: str):
        if kind == "worker_group":
            self.counts[kind] += 1
        return super().decide(kind)


class PreemptionAsFailure(FailurePolicy):
    """Charges a preempted node's failure to max_failures, as any worker failure."""

    def decide(self, kind: str):
        return super().decide("worker_group" if kind == "preemption" else kind)


#: name -> keyword arguments of world.simulate
VARIANTS = {
    "ack-before-commit": {"controller_cls": AckBeforeCommit},
    "restore-oldest": {"manager_cls": RestoreOldest},
    "charge-twice": {"policy_cls": ChargeTwice},
    "keep-staging": {"discard": False},
    "preemption-as-failure": {"policy_cls": PreemptionAsFailure},
}
