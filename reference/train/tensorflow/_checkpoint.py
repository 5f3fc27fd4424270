"""TensorflowCheckpoint: a Checkpoint holding a Keras model file (Ray's V1-style class).

As in Ray 2.60, the class is deprecated and says so: constructing one (its constructor, and
so `from_directory` / `from_model` / `from_h5` / `from_saved_model`) warns with a
DeprecationWarning whose message names the replacement. The Keras callback builds its
checkpoints through `_from_model_internal`, which does not warn: the user never named the
class there. The model file's name is the checkpoint metadata key `_model_filename`;
`get_model` loads it with the Keras that `tensorflow.keras` is in this process (tf-keras in
a worker, see `reference.train._internal.legacy_keras`).
"""

from __future__ import annotations

import contextvars
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from reference.train._checkpoint import Checkpoint

DEPRECATION_MESSAGE = (
    "`TensorflowCheckpoint` is deprecated and will be removed in a future release. Use "
    "`Checkpoint` (reference.train.Checkpoint) directly instead: save the model with "
    "`model.save(os.path.join(d, 'model.keras'))` and report "
    "`Checkpoint.from_directory(d)`.")
MODEL_FILENAME = "model.keras"
#: set while the package builds a checkpoint on the user's behalf (no warning then)
_internal = contextvars.ContextVar("tensorflow_checkpoint_internal", default=False)


class TensorflowCheckpoint(Checkpoint):
    """A Checkpoint with TensorFlow-specific functionality (deprecated, as in Ray)."""

    MODEL_FILENAME_KEY = "_model_filename"

    def __init__(self, *args, **kwargs):
        if not _internal.get():
            warnings.warn(DEPRECATION_MESSAGE, DeprecationWarning, stacklevel=2)
        super().__init__(*args, **kwargs)

    @classmethod
    def _with_model_file(cls, folder: str, filename: str) -> TensorflowCheckpoint:
        checkpoint = cls.from_directory(folder)
        checkpoint.update_metadata({cls.MODEL_FILENAME_KEY: filename})
        return checkpoint

    @classmethod
    def from_model(cls, model, *, preprocessor=None) -> TensorflowCheckpoint:
        """A checkpoint of a new temporary directory holding `model.save(<dir>/model.keras)`."""
        _no_preprocessor(preprocessor, "from_model")
        folder = tempfile.mkdtemp()
        model.save(Path(folder, MODEL_FILENAME).as_posix())
        return cls._with_model_file(folder, MODEL_FILENAME)

    @classmethod
    def _from_model_internal(cls, model, *, preprocessor=None) -> TensorflowCheckpoint:
        """`from_model` without the deprecation warning, for this package's own callers."""
        token = _internal.set(True)
        try:
            return cls.from_model(model, preprocessor=preprocessor)
        finally:
            _internal.reset(token)

    @classmethod
    def from_h5(cls, file_path: str, *, preprocessor=None) -> TensorflowCheckpoint:
        """A checkpoint of a copy of the Keras H5 file `file_path`."""
        _no_preprocessor(preprocessor, "from_h5")
        if not os.path.isfile(file_path) or not str(file_path).endswith(".h5"):
            raise ValueError(
                "Please supply a h5 file path to `TensorflowCheckpoint.from_h5()`; got "
                f"file_path={file_path!r}.")
        folder = tempfile.mkdtemp()
        filename = os.path.basename(file_path)
        shutil.copy(file_path, os.path.join(folder, filename))
        return cls._with_model_file(folder, filename)

    @classmethod
    def from_saved_model(cls, dir_path: str, *, preprocessor=None) -> TensorflowCheckpoint:
        """A checkpoint of a copy of the SavedModel directory `dir_path` (the whole
        directory is the model: `_model_filename` is ".")."""
        _no_preprocessor(preprocessor, "from_saved_model")
        if not os.path.isdir(dir_path):
            raise ValueError("Please supply a directory to "
                             f"`TensorflowCheckpoint.from_saved_model`; got dir_path={dir_path!r}.")
        folder = os.path.join(tempfile.mkdtemp(), "saved_model")
        shutil.copytree(dir_path, folder)
        return cls._with_model_file(folder, ".")

    def get_model(self):
        """The Keras model stored in this checkpoint."""
        metadata = self.get_metadata()
        if self.MODEL_FILENAME_KEY not in metadata:
            raise ValueError(
                "`TensorflowCheckpoint` cannot retrieve the model if you override the "
                "checkpoint metadata. Please use `Checkpoint.update_metadata` instead.")
        from tensorflow import keras

        with self.as_directory() as folder:
            return keras.models.load_model(
                Path(folder, metadata[self.MODEL_FILENAME_KEY]).as_posix())


def _no_preprocessor(preprocessor, method: str) -> None:
    # Ray V2's Checkpoint has no preprocessor; the V1 class still pickles one into the
    # metadata. The reference has no Preprocessor type, so a value here is a mistake.
    if preprocessor is not None:
        raise ValueError(
            f"TensorflowCheckpoint.{method}(preprocessor={preprocessor!r}): preprocessors "
            "are not supported; store what you need in the checkpoint's metadata "
            "(checkpoint.update_metadata({...})).")
