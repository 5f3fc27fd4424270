"""A real S3-protocol server (moto's standalone server) on loopback, for checks and tests
that read or write `s3://`. The suite's pytest plugin offers it as the fixtures
`s3_endpoint` ("host:port", one server per test process, skipped where moto is not
installed) and `s3` (a pyarrow S3FileSystem on it, and a fresh bucket)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

ACCESS_KEY, SECRET_KEY, REGION = "trainspec-test", "trainspec-secret", "us-east-1"
START_DEADLINE_S = 30.0
MISSING = 'the S3 tests need moto\'s standalone server: pip install "moto[server]>=5.2.5"'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(log_path) -> str:
    """Start the server, yield its "host:port", stop it."""
    port = free_port()
    log = open(log_path, "wb")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_DEFAULT_REGION=REGION)
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            assert server.poll() is None, f"moto server exited with {server.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto server did not start listening"
                time.sleep(0.05)  # poll interval while waiting for the port, with a deadline
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        log.close()


def filesystem(endpoint: str):
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(
        endpoint_override=endpoint, scheme="http", access_key=ACCESS_KEY,
        secret_key=SECRET_KEY, region=REGION, allow_bucket_creation=True,
    )


def new_bucket(fs) -> str:
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    fs.create_dir(bucket)
    return bucket


def environment(endpoint: str) -> dict:
    """What pyarrow's S3 client reads to reach the server from an `s3://` URI alone."""
    return {"AWS_ENDPOINT_URL": f"http://{endpoint}", "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory):
    pytest.importorskip("moto.server", reason=MISSING)
    with running(tmp_path_factory.mktemp("moto") / "server.log") as endpoint:
        yield endpoint


@pytest.fixture
def s3(s3_endpoint):
    """(pyarrow S3FileSystem on the loopback server, a fresh bucket)."""
    fs = filesystem(s3_endpoint)
    return fs, new_bucket(fs)
