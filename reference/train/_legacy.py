"""Ray Train V1 names that ``ray.train`` 2.60 still exports: ``SyncConfig``,
``TRAIN_DATASET_KEY`` and the base of the deprecated framework checkpoints.

Ray keeps them importable so that old code imports, and deprecates them where they are used:
`SyncConfig()` builds without a word, but `RunConfig(sync_config=...)` raises
DeprecationWarning (see `_config.RunConfig`); building a framework checkpoint
(`TorchCheckpoint`, `XGBoostCheckpoint`, `LightGBMCheckpoint`) *warns* with a
`RayDeprecationWarning` whose text is Ray's (``ray.util.annotations.Deprecated``: a generic
sentence, a newline, then the class's own message).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Optional

from reference.train._checkpoint import Checkpoint

#: the name under which a trainer's training dataset is passed (``ray.train.constants``)
TRAIN_DATASET_KEY = "train"

_V2_MIGRATION_LINK = ("See this issue for more context and migration options: "
                      "https://github.com/ray-project/ray/issues/49454.")
_GENERIC_DEPRECATION = (
    "This API is deprecated and may be removed in future Ray releases. You could suppress "
    'this warning by setting env variable PYTHONWARNINGS="ignore::DeprecationWarning"')
_PREPROCESSOR_KEY = "preprocessor_pkl"


class RayDeprecationWarning(DeprecationWarning):
    """The warning category of Ray's deprecated APIs (``ray.util.annotations``): a
    DeprecationWarning, so ``-W ignore::DeprecationWarning`` silences it too."""


def deprecation_text(message: str) -> str:
    """What Ray's ``@Deprecated(message=..., warning=True)`` warns with."""
    return f"{_GENERIC_DEPRECATION}\n{message}"


def warn_deprecated(message: str, stacklevel: int = 3) -> None:
    warnings.warn(deprecation_text(message), RayDeprecationWarning, stacklevel=stacklevel)


def framework_checkpoint_message(name: str) -> str:
    return (f"`{name}` is deprecated and will be removed in a future release. Use "
            f"`ray.train.Checkpoint` directly instead. {_V2_MIGRATION_LINK}")


@dataclass
class SyncConfig:
    """V1 syncing settings. Building one is fine; passing it to ``RunConfig(sync_config=)``
    raises DeprecationWarning: Train V2 writes checkpoints straight to ``storage_path``."""

    sync_period: int = 300
    sync_timeout: int = 1800
    sync_artifacts: bool = False
    sync_artifacts_on_checkpoint: bool = True


class FrameworkCheckpoint(Checkpoint):
    """A `Checkpoint` that can carry a pickled preprocessor in its metadata, and warns on
    construction (subclasses set ``_DEPRECATION``). Only load one you trust: the
    preprocessor (and a pickled model) are unpickled when read."""

    _DEPRECATION: Optional[str] = None

    def __init__(self, *args, **kwargs):
        if self._DEPRECATION is not None:
            warn_deprecated(self._DEPRECATION)
        super().__init__(*args, **kwargs)

    def get_preprocessor(self) -> Any:
        """The preprocessor stored with `set_preprocessor`, or None."""
        import cloudpickle

        blob = self.get_metadata().get(_PREPROCESSOR_KEY)
        return None if blob is None else cloudpickle.loads(bytes.fromhex(blob))

    def set_preprocessor(self, preprocessor: Any) -> None:
        import cloudpickle

        self.update_metadata({_PREPROCESSOR_KEY: cloudpickle.dumps(preprocessor).hex()})


class BoosterCheckpoint(FrameworkCheckpoint):
    """A GBDT booster saved as one file (`MODEL_FILENAME`, by the booster's `save_model`);
    subclasses say how to load it back (`_load`)."""

    MODEL_FILENAME = "model"

    @classmethod
    def from_model(cls, booster: Any, *, preprocessor: Any = None,
                   path: Optional[str] = None):
        import os

        folder = model_checkpoint_dir(path)
        booster.save_model(os.path.join(folder, cls.MODEL_FILENAME))
        checkpoint = cls.from_directory(folder)
        if preprocessor:
            checkpoint.set_preprocessor(preprocessor)
        return checkpoint

    def get_model(self) -> Any:
        import os

        with self.as_directory() as folder:
            return self._load(os.path.join(folder, self.MODEL_FILENAME))

    @staticmethod
    def _load(path: str) -> Any:
        raise NotImplementedError  # pragma: no cover - each framework loads its own


def model_checkpoint_dir(path: Optional[str]) -> str:
    """The folder a `from_model` writes into: `path` (which must be a folder) or a new
    temporary one."""
    import os
    import tempfile

    target = path or tempfile.mkdtemp()
    if not os.path.isdir(target):  # Ray's message, then the fix
        raise ValueError(f"`path` must be a directory, but got: {target}. Pass an existing "
                         "(empty) directory, or no path for a temporary one.")
    return target
