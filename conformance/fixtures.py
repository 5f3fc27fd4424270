"""The fixtures every check may use: `impl`, the adapter of the implementation under test,
set up once per session, and the autouse `session_for_check`, which has the adapter's
default session up before each check that builds no cluster of its own (a Ray adapter
starts its local session lazily, so that cluster checks run alone start none)."""

from __future__ import annotations

import os

import pytest


def impl_name(config) -> str:
    return config.getoption("--impl") or os.environ.get("TRAINSPEC_IMPL") or "reference"


@pytest.fixture(scope="session")
def impl(request):
    """The adapter of the implementation under test, set up once per session."""
    from conformance import adapters
    from conformance.adapters.base import SetupError

    adapter = adapters.load(impl_name(request.config))
    try:
        adapter.setup()
    except SetupError as exc:  # e.g. a --ray-address it cannot join
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    yield adapter
    adapter.teardown()


def is_check(item) -> bool:
    """A check of the suite (a `check_*` function in a `check_*.py` file under conformance/),
    not a test that happens to run beside the plugin."""
    return "conformance" in str(item.path) and os.path.basename(str(item.path)).startswith(
        "check_")


@pytest.fixture(autouse=True)
def session_for_check(request):
    if (is_check(request.node) and "impl" in request.fixturenames
            and request.node.get_closest_marker("cluster") is None):
        request.getfixturevalue("impl").ensure_session()
