"""`XGBoostCheckpoint`: Ray Train V1's XGBoost checkpoint, deprecated (building one warns
with a RayDeprecationWarning, as in Ray 2.60). Train V2 code reports plain `Checkpoint`s
(`RayTrainReportCallback.get_model` reads them)."""

from __future__ import annotations

import os
from typing import Any, Optional

import xgboost

from reference.train._legacy import (
    FrameworkCheckpoint,
    framework_checkpoint_message,
    model_checkpoint_dir,
)


class XGBoostCheckpoint(FrameworkCheckpoint):
    """A `Checkpoint` holding an XGBoost booster as ``model.json``."""

    _DEPRECATION = framework_checkpoint_message("XGBoostCheckpoint")
    MODEL_FILENAME = "model.json"

    @classmethod
    def from_model(cls, booster: xgboost.Booster, *, preprocessor: Any = None,
                   path: Optional[str] = None) -> XGBoostCheckpoint:
        folder = model_checkpoint_dir(path)
        booster.save_model(os.path.join(folder, cls.MODEL_FILENAME))
        checkpoint = cls.from_directory(folder)
        if preprocessor:
            checkpoint.set_preprocessor(preprocessor)
        return checkpoint

    def get_model(self) -> xgboost.Booster:
        with self.as_directory() as folder:
            booster = xgboost.Booster()
            booster.load_model(os.path.join(folder, self.MODEL_FILENAME))
            return booster
