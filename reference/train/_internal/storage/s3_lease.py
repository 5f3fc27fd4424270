"""The run-folder lock on S3: a lease object created only if absent.

Design note
-----------
What: `<run>/.run_owner.json` (the owner record) is created with `PutObject` and
`If-None-Match: *`, which S3 (and moto's server) refuse with 412 when the object exists, so
of two fits exactly one creates it. It is deleted with `If-Match: <its ETag>` when the fit
ends, so a fit never deletes a lease that was taken over from it. `pyarrow.fs` has no
conditional put; the lease goes through boto3 (the `s3` extra), with the endpoint,
region and credentials of the run's `S3FileSystem`.

Stale leases: nothing expires by itself (an owner SIGKILLed or lost with its node leaves the
object). A lease whose owner this host can prove dead (same host and boot, pid gone) is taken
over with `PutObject(If-Match=<its ETag>)`, so of two fits taking over one stale lease only
one wins. An owner on another host cannot be checked from here: the error says to delete the
object or to set REFERENCE_TRAIN_TAKE_OVER_RUN=1 for one fit.

Failures: any other refusal or failure of the store (AccessDenied, a 503 after the client's
retries, an unreachable endpoint) raises LeaseError, which fit() reports as
RunFolderLockError: it fails closed, since running unlocked is what the lease exists to
prevent. REFERENCE_TRAIN_RUN_UNLOCKED=1 (run_lock.py) runs such a fit unlocked instead.

Limits: without boto3, or on a store that does not implement conditional writes (501, or an
unknown header refused), the fit runs unlocked, with a warning. The lease is read before it is
created, so a store that ignores `If-None-Match` still refuses a second fit unless both start
within the same few milliseconds.
"""

from __future__ import annotations

import logging

import pyarrow.fs as pafs

from reference.train._internal.storage.run_owner import RunLock, RunOwner

logger = logging.getLogger(__name__)

_CONFLICT = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_UNSUPPORTED = {"NotImplemented", "501", "InvalidArgument", "InvalidRequest"}


class _Unsupported(Exception):
    """The store (or this installation) cannot make a lease."""


class LeaseError(Exception):
    """The store refused or failed a lease request: the fit must not run unlocked.

    `code` is the store's error code (AccessDenied, SlowDown, 503...) or the client's error
    class name when no answer came."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


def client_for(fs: pafs.S3FileSystem):
    """A boto3 S3 client with the settings of `fs` (endpoint, region, credentials)."""
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError as e:
        raise _Unsupported(f"boto3 is not installed ({e}); pip install boto3") from e
    settings = fs.__reduce__()[1][0]  # the constructor arguments, as pickling passes them
    endpoint = settings.get("endpoint_override") or None
    if endpoint and "://" not in endpoint:
        endpoint = f"{settings.get('scheme') or 'https'}://{endpoint}"
    options = {"retries": {"max_attempts": 3, "mode": "standard"}}
    if settings.get("anonymous"):
        options["signature_version"] = UNSIGNED
    if endpoint:
        style = "virtual" if settings.get("force_virtual_addressing") else "path"
        options["s3"] = {"addressing_style": style}
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=settings.get("region") or None,
        aws_access_key_id=settings.get("access_key") or None,
        aws_secret_access_key=settings.get("secret_key") or None,
        aws_session_token=settings.get("session_token") or None,
        verify=settings.get("tls_ca_file_path") or None,
        config=Config(**options),
    )


def _code(error) -> str:
    response = getattr(error, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = str(response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return code if code and not code.isdigit() else status or code


class S3Lease(RunLock):
    def __init__(self, client, bucket: str, key: str, owner: RunOwner, etag: str):
        self._client, self._bucket, self._key = client, bucket, key
        self.owner, self._etag = owner, etag
        self._held = True

    @property
    def uri(self) -> str:
        return f"s3://{self._bucket}/{self._key}"

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.delete_object(Bucket=self._bucket, Key=self._key, IfMatch=self._etag)
        except ClientError as e:
            if _code(e) in _CONFLICT:
                logger.warning("The run-folder lease %s was taken over by another fit while "
                               "this one ran; it is left to that fit.", self.uri)
            elif _code(e) in _UNSUPPORTED:
                self._client.delete_object(Bucket=self._bucket, Key=self._key)
            elif _code(e) not in {"NoSuchKey", "404"}:
                logger.warning("Could not delete the run-folder lease %s: %s", self.uri, e)
        except BotoCoreError as e:
            logger.warning("Could not delete the run-folder lease %s: %s", self.uri, e)


def _read(client, bucket: str, key: str) -> tuple[RunOwner | None, str] | None:
    """(record or None when unreadable, ETag) of the lease, or None when there is none."""
    from botocore.exceptions import ClientError

    try:
        got = client.get_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if _code(e) in {"NoSuchKey", "404"}:
            return None
        raise
    return RunOwner.from_bytes(got["Body"].read()), got["ETag"]


def acquire(fs: pafs.S3FileSystem, bucket: str, key: str, take_over: bool
            ) -> tuple[RunLock | None, RunOwner | None, str]:
    """Try to own the run folder whose lease is s3://bucket/key; returns as
    local_lock.acquire does: (lock, None, ""), (None, holder, "") or (None, None, reason),
    or raises LeaseError when the store refused or failed the request."""
    try:
        return _acquire(fs, bucket, key, take_over)
    except _Unsupported as e:
        return None, None, str(e)


def _acquire(fs, bucket, key, take_over):
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client = client_for(fs)
        me = RunOwner.this_process()
        for _ in range(3):  # a lease created and released again between our two requests
            found = _read(client, bucket, key)
            if found is not None:
                break
            try:
                put = client.put_object(Bucket=bucket, Key=key, Body=me.to_bytes(),
                                        IfNoneMatch="*")
                return S3Lease(client, bucket, key, me, put["ETag"]), None, ""
            except ClientError as e:
                if _code(e) not in _CONFLICT:
                    raise
        else:
            return None, None, ""
        holder, etag = found
        stale = holder is not None and holder.is_dead()
        if not (take_over or stale):
            return None, holder, ""
        try:
            put = client.put_object(Bucket=bucket, Key=key, Body=me.to_bytes(), IfMatch=etag)
        except ClientError as e:
            if _code(e) not in _CONFLICT:
                raise
            again = _read(client, bucket, key)
            return None, None if again is None else again[0], ""
        why = "it is dead" if stale else "REFERENCE_TRAIN_TAKE_OVER_RUN=1 is set"
        logger.warning("Taking over the run-folder lease s3://%s/%s from %s (%s). Its "
                       "unfinished uploads stay; the run resumes from its last registered "
                       "checkpoint.", bucket, key,
                       holder.describe() if holder else "an unreadable owner record", why)
        return S3Lease(client, bucket, key, me, put["ETag"]), None, ""
    except ClientError as e:
        if _code(e) in _UNSUPPORTED:
            raise _Unsupported(f"the store does not support conditional writes ({e})") from e
        raise LeaseError(f"the store answered {_code(e) or 'an error'} ({e})", _code(e)) from e
    except BotoCoreError as e:
        raise LeaseError(f"the store could not be reached ({e})", type(e).__name__) from e


__all__ = ["LeaseError", "S3Lease", "acquire", "client_for"]
