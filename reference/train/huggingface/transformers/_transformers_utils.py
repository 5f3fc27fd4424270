"""RayTrainReportCallback and prepare_trainer for ``transformers.Trainer``.

The callback acts in ``on_save``, which the Trainer calls on every process after it saved a
checkpoint, so every rank joins the report round. The metrics are all of
``state.log_history`` merged in order (later entries win): the Trainer's own keys (``loss``,
``learning_rate``, ``grad_norm``, ``epoch``, ``step``, ``eval_*`` once evaluated). The
checkpoint is a copy of the newest ``checkpoint-N`` folder under ``args.output_dir`` in a
temporary folder, as ``<tmp>/checkpoint/``; the committed layout is therefore
``checkpoint_*/checkpoint/<Hugging Face files>``. A rank that has no checkpoint folder (its
``output_dir`` is not shared with the process that saved) reports none. The temporary folder
is deleted when ``on_save`` returns, which in local mode leaves ``Result.checkpoint``
naming a folder that is gone, as in Ray.

Without ``transformers`` the module still imports (the callback is then a plain object);
``prepare_trainer`` raises the ImportError.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Optional

from torch.utils.data import DataLoader, IterableDataset

_IMPORT_ERROR: Optional[ImportError] = None
try:
    import transformers.trainer
    from transformers.trainer_callback import TrainerCallback
except ImportError as exc:
    _IMPORT_ERROR = exc
    TrainerCallback = object


class RayTrainReportCallback(TrainerCallback):
    """Reports the merged ``log_history`` and the latest Hugging Face checkpoint (under
    ``CHECKPOINT_NAME``) each time the Trainer saves one. Build it anywhere.

    Align the logging, evaluation and save schedules so the metric you monitor is fresh
    when a checkpoint is saved (e.g. eval and save both per epoch, or ``save_steps`` a
    multiple of ``eval_steps``).
    """

    CHECKPOINT_NAME = "checkpoint"

    def on_save(self, args, state, control, **kwargs):
        from reference.train import Checkpoint, report

        with TemporaryDirectory() as tmp:
            metrics: dict = {}
            for entry in state.log_history:
                metrics.update(entry)
            latest = transformers.trainer.get_last_checkpoint(args.output_dir)
            checkpoint = None
            if latest is not None:
                shutil.copytree(latest, Path(tmp, self.CHECKPOINT_NAME).as_posix())
                checkpoint = Checkpoint.from_directory(tmp)
            report(metrics=metrics, checkpoint=checkpoint)


def _is_data_iterable(obj) -> bool:
    """A shard's batch iterator (what ``iter_torch_batches()`` and friends return): its
    items are whole batches. Recognised by the type name that Ray Data's and
    reference.data's iterables share, so that neither library needs importing."""
    return type(obj).__name__ == "_IterableFromIterator"


class _IterableOfBatches(IterableDataset):
    def __init__(self, iterable) -> None:
        super().__init__()
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)


def _first(items):
    return items[0]


def _one_batch_per_step(iterable) -> DataLoader:
    # Each item already is a batch: a loader of batch size 1 that unwraps it.
    return DataLoader(_IterableOfBatches(iterable), batch_size=1, collate_fn=_first)


def prepare_trainer(trainer):
    """Let a ``transformers.Trainer`` read datasets that are iterators of batches (one batch
    per step; set ``max_steps``), by changing its class to a subclass that builds those
    loaders; everything else is left to the Trainer. Returns the same object."""
    if _IMPORT_ERROR is not None:
        raise _IMPORT_ERROR
    base = type(trainer)

    class RayTransformersTrainer(base):
        def get_train_dataloader(self) -> DataLoader:
            if _is_data_iterable(self.train_dataset):
                return _one_batch_per_step(self.train_dataset)
            return super().get_train_dataloader()

        def get_eval_dataloader(self, eval_dataset=None) -> DataLoader:
            if eval_dataset is None:
                eval_dataset = self.eval_dataset
            named = (isinstance(eval_dataset, str) and isinstance(self.eval_dataset, dict)
                     and _is_data_iterable(self.eval_dataset[eval_dataset]))
            if named:
                return _one_batch_per_step(self.eval_dataset[eval_dataset])
            if _is_data_iterable(eval_dataset):
                return _one_batch_per_step(eval_dataset)
            return super().get_eval_dataloader(eval_dataset)

    trainer.__class__ = RayTransformersTrainer
    return trainer
