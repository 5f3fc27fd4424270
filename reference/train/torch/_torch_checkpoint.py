"""`TorchCheckpoint`: Ray Train V1's Torch checkpoint, deprecated (building one warns with a
RayDeprecationWarning, as in Ray 2.60). Prefer a plain `Checkpoint` of a folder you save
into with `torch.save`."""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any, Optional

import torch

from reference.train._legacy import (
    FrameworkCheckpoint,
    framework_checkpoint_message,
    warn_deprecated,
)

_FROM_MODEL_DEPRECATION = (
    "`TorchCheckpoint.from_model()` is deprecated and will be removed in a future release. "
    "It stores the entire ``nn.Module`` via pickle, which allows arbitrary code execution "
    "when loaded from an untrusted source. Use `TorchCheckpoint.from_state_dict()` or "
    "migrate to `ray.train.Checkpoint`. See this issue for more context and migration "
    "options: https://github.com/ray-project/ray/issues/49454.")


def _strip_prefix(state_dict: dict, prefix: str = "module.") -> dict:
    """A copy without the DistributedDataParallel wrapper's key prefix."""
    return {(k[len(prefix):] if k.startswith(prefix) else k): value
            for k, value in state_dict.items()}


class TorchCheckpoint(FrameworkCheckpoint):
    """A `Checkpoint` holding a model (``model.pt``): a state dict or a whole module."""

    _DEPRECATION = framework_checkpoint_message("TorchCheckpoint")
    MODEL_FILENAME = "model.pt"

    @classmethod
    def from_state_dict(cls, state_dict: dict[str, Any], *,
                        preprocessor: Any = None) -> TorchCheckpoint:
        folder = tempfile.mkdtemp()
        torch.save(_strip_prefix(state_dict), os.path.join(folder, cls.MODEL_FILENAME))
        checkpoint = cls.from_directory(folder)
        if preprocessor:
            checkpoint.set_preprocessor(preprocessor)
        return checkpoint

    @classmethod
    def from_model(cls, model: torch.nn.Module, *,
                   preprocessor: Any = None) -> TorchCheckpoint:
        warn_deprecated(_FROM_MODEL_DEPRECATION)
        folder = tempfile.mkdtemp()
        torch.save(model, os.path.join(folder, cls.MODEL_FILENAME))
        checkpoint = cls.from_directory(folder)
        if preprocessor:
            checkpoint.set_preprocessor(preprocessor)
        return checkpoint

    def get_model(self, model: Optional[torch.nn.Module] = None) -> torch.nn.Module:
        """The stored module, or `model` with the stored state dict loaded into it. Only
        load a checkpoint you trust: a whole module is unpickled."""
        with self.as_directory() as folder:
            path = os.path.join(folder, self.MODEL_FILENAME)
            if not os.path.exists(path):  # Ray's message
                raise RuntimeError(
                    "`model.pt` not found within this checkpoint. Make sure you created this "
                    "`TorchCheckpoint` from one of its public constructors (`from_state_dict` "
                    "or `from_model`).")
            stored = torch.load(path, map_location="cpu", weights_only=False)
        if isinstance(stored, torch.nn.Module):
            if model is not None:
                warnings.warn("TorchCheckpoint already contains all information needed. "
                              "Discarding provided `model` argument.", stacklevel=2)
            return stored
        if model is None:
            raise ValueError(
                "TorchCheckpoint.get_model(model=None): the checkpoint holds a state dict, "
                "not a module. Pass the model to load it into: get_model(model).")
        model.load_state_dict(_strip_prefix(stored))
        return model
