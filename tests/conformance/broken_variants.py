"""Deliberately broken variants of the reference, each an adapter factory for `--impl`.

Each variant patches one rule of the contract in the driver process (where the reference's
controller runs) when its adapter is set up. A variant whose rule lives in the workers (a
framework integration's callback or strategy) names a patch of `broken_worker_patches`,
which is applied in the driver and, through `reference.PRELOAD`, in the node supervisors
that every worker forks from. `test_broken_variants.py` runs the checks that
must catch it and expects each to fail under the clause the variant breaks, with a message
that names the breakage (a crash is not a catch).
"""

from __future__ import annotations

import os

from conformance.adapters.reference_adapter import ReferenceAdapter


class _Variant(ReferenceAdapter):
    name = "broken"

    def setup(self) -> None:
        self.patch()

    def patch(self) -> None:
        raise AssertionError("a variant must patch something")


class _Shipped(_Variant):
    """A variant the reference ships (reference/train/simulation/variants.py), which the
    deterministic simulation catches too: installed into the real stack of this process."""

    shipped = ""

    def patch(self):
        from reference.train.simulation import variants

        variants.install(self.shipped)


class DropsLatest(_Shipped):
    """Retention evicts the latest checkpoint too."""

    shipped = "drops-latest"


class IgnoresMaxFailures(_Shipped):
    """Every worker failure is retried."""

    shipped = "ignores-max-failures"


class Rank1Metrics(_Shipped):
    """A round's metrics are taken from the highest rank instead of rank 0."""

    shipped = "rank1-metrics"


class RegistersIncomplete(_Shipped):
    """A round is consolidated as soon as its first rank reports (no barrier)."""

    shipped = "registers-incomplete"


class RestartsOnlyFailedWorker(_Shipped):
    """A failed rank is replaced by a fresh worker while its peers keep running."""

    # Its fits never end (the peers wait for a rank that starts over): the deadline ends
    # them. By then the fresh rank has started (within 4 s on a 2-core machine at load 16).
    fit_deadline_s = 5.0
    shipped = "restarts-only-failed-worker"


class SkipsBackendShutdown(_Shipped):
    """The backend's on_shutdown is never called (every group is stopped as on abort)."""

    shipped = "skips-backend-shutdown"


class _WorkerVariant(_Variant):
    worker_patch = ""

    def patch(self):
        import reference
        from reference import _runtime

        os.environ["TRAINSPEC_BROKEN_VARIANT"] = self.worker_patch
        _runtime.PRELOAD = reference.PRELOAD = (*_runtime.PRELOAD, "broken_worker_patches")
        import broken_worker_patches

        broken_worker_patches.apply()


class LightningFullDataPerRank(_WorkerVariant):
    """RayDDPStrategy gives Lightning's sampler one replica: every rank trains on all data."""

    worker_patch = "lightning_full_data_per_rank"


class LightningCheckpointName(_WorkerVariant):
    """Lightning's RayTrainReportCallback saves `model.ckpt`."""

    worker_patch = "lightning_checkpoint_name"


class TransformersLastLogOnly(_WorkerVariant):
    """Transformers' RayTrainReportCallback reports the last log_history entry, unmerged."""

    worker_patch = "transformers_last_log_only"


class DataShardsOverlap(_Variant):
    """DataConfig gives every rank the whole of a split dataset."""

    def patch(self):
        from reference.train import _data_config

        def configure(config, datasets, world_size, worker_handles, worker_node_ids, **kw):
            return [{name: ds.iterator() for name, ds in datasets.items()}
                    for _ in range(world_size)]

        _data_config.DataConfig.configure = configure


class DataNoShardBarrier(_WorkerVariant):
    """get_dataset_shard returns at once on every rank (rank 0 is not waited for)."""

    worker_patch = "data_no_shard_barrier"


class TuneIgnoresScheduler(_Variant):
    """The Tune controller asks the scheduler but always lets the trial go on."""

    def patch(self):
        from reference.tune._controller import TuneController

        original = TuneController._on_result

        def on_result(controller, proc, worker_id, result, dir_name):
            scheduler = controller.scheduler
            decide = scheduler.on_trial_result
            scheduler.on_trial_result = lambda c, t, r: (decide(c, t, r), "CONTINUE")[1]
            try:
                return original(controller, proc, worker_id, result, dir_name)
            finally:
                del scheduler.on_trial_result

        TuneController._on_result = on_result


class TuneRetryFromScratch(_Variant):
    """A failed Tune trial is restarted without its latest checkpoint."""

    def patch(self):
        from reference.tune._controller import TuneController

        original = TuneController._failed

        def failed(controller, trial, error, text):
            kept, trial.checkpoints = trial.checkpoints, []
            try:
                original(controller, trial, error, text)
            finally:
                trial.checkpoints = kept

        TuneController._failed = failed


def tune_ignores_scheduler():
    return TuneIgnoresScheduler()


def tune_retry_from_scratch():
    return TuneRetryFromScratch()


def data_shards_overlap():
    return DataShardsOverlap()


def data_no_shard_barrier():
    return DataNoShardBarrier()


def skips_backend_shutdown():
    return SkipsBackendShutdown()


def lightning_full_data_per_rank():
    return LightningFullDataPerRank()


def lightning_checkpoint_name():
    return LightningCheckpointName()


def transformers_last_log_only():
    return TransformersLastLogOnly()


def restarts_only_failed_worker():
    return RestartsOnlyFailedWorker()


def drops_latest():
    return DropsLatest()


def ignores_max_failures():
    return IgnoresMaxFailures()


def rank1_metrics():
    return Rank1Metrics()


def registers_incomplete():
    return RegistersIncomplete()
