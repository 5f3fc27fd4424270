"""The S3 run-folder lease fails closed: a store that denies or fails the lease request
(here a proxy in front of the real S3-protocol server refusing only `.run_owner.json`)
fails the fit with RunFolderLockError before anything runs, unless
REFERENCE_TRAIN_RUN_UNLOCKED=1; REFERENCE_TRAIN_TAKE_OVER_RUN=1 takes over one fit's folder
and is consumed by it (storage/run_lock.py, storage/s3_lease.py)."""

from __future__ import annotations

import json
import logging
import os
import pickle

import pyarrow.fs as pafs
import pytest
from s3_fault_proxy import FaultProxy

import reference
import reference.train as train
from conformance import s3_server
from reference.train._exceptions import RunFolderInUseError, RunFolderLockError
from reference.train._internal.storage import CheckpointManagerInitializationError, StorageContext
from reference.train._internal.storage.run_lock import (
    UNLOCKED_ENV,
    acquire_run_lock,
    take_over_requested,
    unlocked_allowed,
)
from reference.train._internal.storage.run_owner import TAKE_OVER_ENV

pytest.importorskip("moto.server", reason=s3_server.MISSING)
pytest.importorskip("boto3", reason="the S3 lease needs boto3 (the s3 extra)")

pytestmark = pytest.mark.slow


def _through(proxy: FaultProxy) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(endpoint_override=proxy.endpoint, scheme="http",
                             access_key=s3_server.ACCESS_KEY, secret_key=s3_server.SECRET_KEY,
                             region=s3_server.REGION)


def _never_called():
    raise AssertionError("the training function ran without the run-folder lock")


def test_a_lease_the_store_denies_fails_the_fit_closed(s3_endpoint, s3):
    fs, bucket = s3
    with FaultProxy(s3_endpoint, ".run_owner.json", 403, "AccessDenied") as proxy:
        trainer = train.DataParallelTrainer(
            _never_called, scaling_config=train.ScalingConfig(num_workers=1),
            run_config=train.RunConfig(storage_path=f"{bucket}/fit", name="run",
                                       storage_filesystem=_through(proxy)))
        try:
            with pytest.raises(RunFolderLockError) as info:
                trainer.fit()
        finally:
            reference.shutdown()
        assert proxy.refused >= 1
    message = str(info.value)
    assert f"the run-folder lease s3://{bucket}/fit/run/.run_owner.json could not be taken" \
        in message, message
    assert "AccessDenied" in message and "s3:PutObject" in message, message
    assert f"{UNLOCKED_ENV}=1" in message, message
    assert info.value.run_path == f"{bucket}/fit/run"
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.run_path) == (message, info.value.run_path)
    # Nothing of the run was touched beyond the storage marker StorageContext writes.
    found = fs.get_file_info(pafs.FileSelector(f"{bucket}/fit/run", recursive=True))
    assert [i.base_name for i in found] == [".validate_storage_marker"]


def test_a_store_unavailable_for_the_lease_fails_closed(s3_endpoint, s3):
    _, bucket = s3
    with FaultProxy(s3_endpoint, ".run_owner.json", 503, "ServiceUnavailable") as proxy:
        storage = StorageContext(bucket, "run", storage_filesystem=_through(proxy))
        with pytest.raises(RunFolderLockError, match="ServiceUnavailable") as info:
            acquire_run_lock(storage)
        assert proxy.refused >= 1
    assert "Retry when the store answers again" in str(info.value)


def test_the_opt_out_runs_unlocked_with_a_warning(s3_endpoint, s3, caplog, monkeypatch):
    _, bucket = s3
    monkeypatch.delenv(UNLOCKED_ENV, raising=False)
    assert not unlocked_allowed()
    monkeypatch.setenv(UNLOCKED_ENV, "1")
    assert unlocked_allowed()
    with FaultProxy(s3_endpoint, ".run_owner.json", 403, "AccessDenied") as proxy:
        storage = StorageContext(bucket, "run", storage_filesystem=_through(proxy))
        with caplog.at_level(logging.WARNING):
            lock = acquire_run_lock(storage, allow_unlocked=unlocked_allowed())
    lock.release()
    assert f"is not locked: {UNLOCKED_ENV}=1 is set and the store answered AccessDenied" \
        in caplog.text


def _foreign_lease_and_corrupt_snapshot(fs, bucket: str, name: str) -> None:
    run = StorageContext(bucket, name, storage_filesystem=fs)
    with fs.open_output_stream(f"{run.experiment_fs_path}/.run_owner.json") as f:
        f.write(json.dumps({"host": "elsewhere", "pid": 4242, "started_at": 0.0,
                            "token": "t"}).encode())
    # The fit stops right after taking the lock, before any worker starts.
    with fs.open_output_stream(run.checkpoint_manager_snapshot_path) as f:
        f.write(b"{not json")


def test_take_over_applies_to_one_fit(s3, monkeypatch, caplog):
    fs, bucket = s3
    for name in ("first", "second"):
        _foreign_lease_and_corrupt_snapshot(fs, bucket, name)

    def fit(name):
        train.DataParallelTrainer(
            _never_called, scaling_config=train.ScalingConfig(num_workers=1),
            run_config=train.RunConfig(storage_path=bucket, name=name,
                                       storage_filesystem=fs)).fit()

    monkeypatch.setenv(TAKE_OVER_ENV, "1")
    try:
        with caplog.at_level(logging.WARNING):
            with pytest.raises(CheckpointManagerInitializationError):
                fit("first")  # took the folder over, then found the corrupt snapshot
        assert "pid 4242 on host 'elsewhere'" in caplog.text
        assert TAKE_OVER_ENV not in os.environ, "the take-over was not consumed by its fit"
        with pytest.raises(RunFolderInUseError, match="pid 4242 on host 'elsewhere'"):
            fit("second")
    finally:
        reference.shutdown()
    assert not take_over_requested({})
    assert take_over_requested({TAKE_OVER_ENV: "1"})
