"""The LightGBM tests of this folder need the `lightgbm` extra."""

import importlib.util

import pytest


def test_lightgbm_is_installed():
    if importlib.util.find_spec("lightgbm") is None:
        pytest.skip("the LightGBM tests need `pip install -e '.[lightgbm]'`")
    import reference.train.lightgbm  # noqa: F401
