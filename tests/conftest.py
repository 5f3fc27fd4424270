"""Fixtures shared by every test folder (helpers live in modules of their own names)."""

import pytest
import s3_server


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory):
    pytest.importorskip("moto.server", reason=s3_server.MISSING)
    with s3_server.running(tmp_path_factory.mktemp("moto") / "server.log") as endpoint:
        yield endpoint


@pytest.fixture
def s3(s3_endpoint):
    """(pyarrow S3FileSystem on the loopback server, a fresh bucket)."""
    fs = s3_server.filesystem(s3_endpoint)
    return fs, s3_server.new_bucket(fs)
