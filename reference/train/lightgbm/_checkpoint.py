"""`LightGBMCheckpoint`: Ray Train V1's LightGBM checkpoint, deprecated (building one warns
with a RayDeprecationWarning, as in Ray 2.60). Train V2 code reports plain `Checkpoint`s
(`RayTrainReportCallback.get_model` reads them)."""

from __future__ import annotations

import lightgbm

from reference.train._legacy import BoosterCheckpoint, framework_checkpoint_message


class LightGBMCheckpoint(BoosterCheckpoint):
    """A `Checkpoint` holding a LightGBM booster as ``model.txt``."""

    _DEPRECATION = framework_checkpoint_message("LightGBMCheckpoint")
    MODEL_FILENAME = "model.txt"

    @staticmethod
    def _load(path: str) -> lightgbm.Booster:
        return lightgbm.Booster(model_file=path)
