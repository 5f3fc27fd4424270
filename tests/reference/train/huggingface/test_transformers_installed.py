"""The Hugging Face tests of this folder need the `transformers` extra."""

import importlib.util

import pytest


def test_transformers_is_installed():
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("the Hugging Face tests need `pip install -e '.[transformers]'`")
    import accelerate  # noqa: F401 - transformers.Trainer needs it
