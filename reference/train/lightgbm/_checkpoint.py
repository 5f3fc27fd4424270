"""`LightGBMCheckpoint`: Ray Train V1's LightGBM checkpoint, deprecated (building one warns
with a RayDeprecationWarning, as in Ray 2.60). Train V2 code reports plain `Checkpoint`s
(`RayTrainReportCallback.get_model` reads them)."""

from __future__ import annotations

import os
from typing import Any, Optional

import lightgbm

from reference.train._legacy import (
    FrameworkCheckpoint,
    framework_checkpoint_message,
    model_checkpoint_dir,
)


class LightGBMCheckpoint(FrameworkCheckpoint):
    """A `Checkpoint` holding a LightGBM booster as ``model.txt``."""

    _DEPRECATION = framework_checkpoint_message("LightGBMCheckpoint")
    MODEL_FILENAME = "model.txt"

    @classmethod
    def from_model(cls, booster: lightgbm.Booster, *, preprocessor: Any = None,
                   path: Optional[str] = None) -> LightGBMCheckpoint:
        folder = model_checkpoint_dir(path)
        booster.save_model(os.path.join(folder, cls.MODEL_FILENAME))
        checkpoint = cls.from_directory(folder)
        if preprocessor:
            checkpoint.set_preprocessor(preprocessor)
        return checkpoint

    def get_model(self) -> lightgbm.Booster:
        with self.as_directory() as folder:
            return lightgbm.Booster(model_file=os.path.join(folder, self.MODEL_FILENAME))
