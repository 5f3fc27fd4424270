"""The XGBoost tests of this folder need the `xgboost` extra."""

import importlib.util

import pytest


def test_xgboost_is_installed():
    if importlib.util.find_spec("xgboost") is None:
        pytest.skip("the XGBoost tests need `pip install -e '.[xgboost]'`")
    import reference.train.xgboost  # noqa: F401
