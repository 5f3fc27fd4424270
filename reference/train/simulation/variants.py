"""Broken variants of the reference, shipped (as the fake worker group is) so that the
simulator's own tests, the conformance suite's meta-tests, and anyone checking that a
checker catches a bug can run them: `python -m reference.simulate --variant NAME`, or
`install(NAME)` to put one into the real stack (what `tests/conformance/broken_variants.py`
does before a check runs in its process). Each is the real code with one rule broken, as a
subclass of the controller, the checkpoint manager or the failure policy.
"""

from __future__ import annotations

import dataclasses

from reference.train._internal.controller.controller import Controller
from reference.train._internal.controller.policies import FailureDecision, FailurePolicy
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


class Rank1Metrics(Controller):
    """A round's metrics are taken from the highest rank instead of rank 0."""

    def _on_report(self, state, report):
        arrived = state.rounds.setdefault(report.index, {})
        if len(arrived) == state.size - 1 and report.rank not in arrived:
            last = max([*arrived, report.rank])
            source = report if last == report.rank else arrived[last]
            for rank, r in list(arrived.items()):
                arrived[rank] = dataclasses.replace(r, metrics=source.metrics)
            report = dataclasses.replace(report, metrics=source.metrics)
        return super()._on_report(state, report)


class RegistersIncomplete(Controller):
    """A round is consolidated as soon as its first rank reports (no barrier): the
    checkpoint is committed and registered before the other ranks' files are in."""

    def _on_report(self, state, report):
        done = self.__dict__.setdefault("_done_rounds", {})
        if (state.attempt, report.index) in done:
            state.group.ack(report.rank, done[state.attempt, report.index])
            return state, "late rank acknowledged"
        size, state.size = state.size, 1
        try:
            state.rounds.pop(report.index, None)
            result = super()._on_report(state, report)
        finally:
            state.size = size
        done[state.attempt, report.index] = Ack(report.index, self.manager.latest_checkpoint)
        return result


class RestartsOnlyFailedWorker(Controller):
    """A failed rank is replaced by a fresh worker while its peers keep running."""

    def _on_failure(self, state, first):
        respawn = getattr(state.group, "respawn", None)
        if respawn is not None:  # the simulated group
            respawn(first.rank)
        else:
            _respawn_on_simcluster(self, state.group, first.rank)
        return state, f"replaced rank {first.rank} only"


def _respawn_on_simcluster(controller, group, rank: int) -> None:
    from reference.train._internal.worker_group.api import StartTraining
    from reference.train._internal.worker_group.worker import simcluster_entry

    node_id, boot, bundle = group.boots[rank]
    group.workers[rank] = controller.factory.cluster.start_worker(
        node_id, simcluster_entry, args=(group.id, boot), env=boot.env,
        bundle=group.placement[bundle], name=f"{group.id}:rank{rank}")
    group.factory.cluster.send(group.workers[rank].id, StartTraining())


class SkipsBackendShutdown(Controller):
    """The backend's on_shutdown is never called (every group is stopped as on abort)."""

    def _end_attempt(self, state, graceful: bool = True):
        return super()._end_attempt(state, graceful=False)


class RestoreOldest(CheckpointManager):
    """Gives a restarted group the oldest checkpoint kept instead of the latest."""

    @property
    def latest_checkpoint(self):
        records = self.checkpoint_results
        return self.checkpoint_of(records[0]) if records else None


class DropsLatest(CheckpointManager):
    """Retention evicts the latest checkpoint too (when it is among the worst scored)."""

    def _retention(self, results, latest):
        k = self._num_to_keep
        if k is None or len(results) <= k:
            return []
        return list(range(len(results) - k))  # the latest is not protected


class ChargeTwice(FailurePolicy):
    """Charges every worker-group failure twice against max_failures."""

    def decide(self, kind: str):
        if kind == "worker_group":
            self.counts[kind] += 1
        return super().decide(kind)


class IgnoresMaxFailures(FailurePolicy):
    """Every worker failure is retried."""

    def decide(self, kind: str):
        return FailureDecision(True, kind, 1, -1)


class PreemptionAsFailure(FailurePolicy):
    """Charges a preempted node's failure to max_failures, as any worker failure."""

    def decide(self, kind: str):
        return super().decide("worker_group" if kind == "preemption" else kind)


#: name -> keyword arguments of world.simulate
VARIANTS = {
    "ack-before-commit": {"controller_cls": AckBeforeCommit},
    "rank1-metrics": {"controller_cls": Rank1Metrics},
    "registers-incomplete": {"controller_cls": RegistersIncomplete},
    "restarts-only-failed-worker": {"controller_cls": RestartsOnlyFailedWorker},
    "skips-backend-shutdown": {"controller_cls": SkipsBackendShutdown},
    "restore-oldest": {"manager_cls": RestoreOldest},
    "drops-latest": {"manager_cls": DropsLatest},
    "charge-twice": {"policy_cls": ChargeTwice},
    "ignores-max-failures": {"policy_cls": IgnoresMaxFailures},
    "preemption-as-failure": {"policy_cls": PreemptionAsFailure},
    "keep-staging": {"discard": False},
}

#: which name of the fit's module (controller/run.py) each keyword replaces in `install`
_RUN_NAMES = {"controller_cls": "Controller", "manager_cls": "CheckpointManager",
              "policy_cls": "FailurePolicy"}


def install(name: str) -> None:
    """Put variant `name` into the real stack of this process: every later fit builds its
    controller, checkpoint manager or failure policy from the variant's class."""
    from reference.train._internal.controller import run

    if name not in VARIANTS:
        raise ValueError(f"install({name!r}): not a variant; the variants are "
                         f"{', '.join(sorted(VARIANTS))}")
    for keyword, value in VARIANTS[name].items():
        if keyword == "discard":
            run.discard_staged = lambda storage, prefix, attempt: None
        else:
            setattr(run, _RUN_NAMES[keyword], value)
