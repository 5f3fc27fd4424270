"""`XGBoostCheckpoint`: Ray Train V1's XGBoost checkpoint, deprecated (building one warns
with a RayDeprecationWarning, as in Ray 2.60). Train V2 code reports plain `Checkpoint`s
(`RayTrainReportCallback.get_model` reads them)."""

from __future__ import annotations

import xgboost

from reference.train._legacy import BoosterCheckpoint, framework_checkpoint_message


class XGBoostCheckpoint(BoosterCheckpoint):
    """A `Checkpoint` holding a XGBoost booster as ``model.json``."""

    _DEPRECATION = framework_checkpoint_message("XGBoostCheckpoint")
    MODEL_FILENAME = "model.json"

    @staticmethod
    def _load(path: str) -> xgboost.Booster:
        booster = xgboost.Booster()
        booster.load_model(path)
        return booster
