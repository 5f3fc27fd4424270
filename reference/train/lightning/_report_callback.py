"""RayTrainReportCallback: report Lightning's metrics and a checkpoint at each epoch's end.

Design note
-----------
The hook is ``on_train_epoch_end`` and it runs on every rank: ``report()`` is a round every
rank must join. Each rank saves into its own folder, ``<tmp>/lightning_checkpoints-...
-world_rank=<r>/<epoch>/``; Lightning writes ``checkpoint.ckpt`` only on global rank 0, so
the other ranks report an empty folder, and the committed checkpoint is
``checkpoint_*/checkpoint.ckpt``. The metrics are ``trainer.callback_metrics`` as Python
numbers (``report()`` refuses tensors) with ``epoch`` and ``step`` set last, so they win
over logged values of the same name; validation runs before this hook, so ``val_*`` metrics
are included.

Ordering: report, then the strategy's barrier, then delete the local folder. The barrier
keeps a fast rank from starting the next epoch (and its next report) while a slow rank is
still inside this one. With ``CheckpointUploadMode.ASYNC`` the upload owns the folder after
``report()`` returns, so it is left for the upload to delete; every other mode deletes it
here, ``NO_UPLOAD`` included. In local mode the checkpoint passed to ``report()`` is the
result's checkpoint, so after this deletion ``Result.checkpoint`` names a folder that no
longer exists, as in Ray.

The per-rank folder prefix is fixed for a run (its storage folder, its name, the rank), so
a restarted worker finds and removes what a crashed predecessor left behind, and two runs on
one host do not share folders.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from reference.train.lightning._package import pl


def _run_key(context) -> str:
    storage = context.get_storage()
    where = storage.experiment_fs_path if storage is not None else f"local-{os.getpid()}"
    return hashlib.sha1(where.encode()).hexdigest()[:12]


class RayTrainReportCallback(pl.callbacks.Callback):
    """Reports ``trainer.callback_metrics`` (plus ``epoch`` and ``step``) and a checkpoint
    holding ``checkpoint.ckpt`` at the end of every training epoch, from every rank.

    Build it inside the training function (it reads the train context).
    ``checkpoint_upload_mode=None`` means ``CheckpointUploadMode.SYNC``; ``validation`` is
    passed on to ``report()``.
    """

    CHECKPOINT_NAME = "checkpoint.ckpt"

    def __init__(self, checkpoint_upload_mode=None, validation=False) -> None:
        from reference.train import CheckpointUploadMode, get_context

        super().__init__()
        self.checkpoint_upload_mode = (CheckpointUploadMode.SYNC if checkpoint_upload_mode is None
                                       else checkpoint_upload_mode)
        self.validation = validation
        context = get_context()
        self.tmpdir_prefix = Path(
            tempfile.gettempdir(),
            f"lightning_checkpoints-run={_run_key(context)}-"
            f"name={context.get_experiment_name()}-world_rank={context.get_world_rank()}",
        ).as_posix()
        if os.path.isdir(self.tmpdir_prefix):
            shutil.rmtree(self.tmpdir_prefix)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        from reference.train import Checkpoint, report

        folder = Path(self.tmpdir_prefix, str(trainer.current_epoch)).as_posix()
        os.makedirs(folder, exist_ok=True)
        metrics = {k: v.item() for k, v in trainer.callback_metrics.items()}
        metrics["epoch"] = trainer.current_epoch
        metrics["step"] = trainer.global_step
        trainer.save_checkpoint(Path(folder, self.CHECKPOINT_NAME).as_posix(), weights_only=False)
        report(metrics=metrics, checkpoint=Checkpoint.from_directory(folder),
               checkpoint_upload_mode=self.checkpoint_upload_mode, validation=self.validation)
        trainer.strategy.barrier()
        if self.checkpoint_upload_mode.default_delete_local_checkpoint_after_upload():
            return
        shutil.rmtree(folder)
