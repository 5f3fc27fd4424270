"""The Lightning tests of this folder need the `lightning` extra."""

import importlib.util

import pytest


def test_lightning_is_installed():
    if importlib.util.find_spec("lightning") is None and importlib.util.find_spec(
            "pytorch_lightning") is None:
        pytest.skip("the Lightning tests need `pip install -e '.[lightning]'`")
    import reference.train.lightning  # noqa: F401
