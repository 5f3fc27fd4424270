"""The torch tests of this folder run against the torch that the `torch` extra pins."""

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch tests need `pip install -e '.[torch]'`")


def test_installed_torch_is_the_pinned_release():
    pyproject = (Path(__file__).resolve().parents[4] / "pyproject.toml").read_text()
    pinned = re.search(r'torch = \["torch==([\d.]+)"\]', pyproject).group(1)
    assert torch.__version__.split("+")[0] == pinned, (torch.__version__, pinned)
