"""The other process of test_run_lock.py and test_s3.py: it owns a run folder.

    python lock_child.py lock STORAGE_PATH NAME [S3_ENDPOINT ACCESS_KEY SECRET_KEY REGION]
        takes the run-folder lock as fit() does, prints "HELD <pid>", and releases it when
        a line arrives on stdin (or stdin closes), then prints "RELEASED".
    python lock_child.py fit STORAGE_PATH NAME SIGNAL_DIR
        runs a real 1-worker fit() that reports a checkpoint, creates SIGNAL_DIR/ready, waits
        (polling, with a deadline) for SIGNAL_DIR/go, reports a second checkpoint and returns.

Kept apart from the test modules so that the child imports only what it needs.
"""

from __future__ import annotations

import os
import sys
import time

WAIT_S = 120.0


def hold_lock(storage_path: str, name: str, s3: list[str]) -> None:
    from reference.train._internal.storage import StorageContext
    from reference.train._internal.storage.run_lock import acquire_run_lock

    fs = None
    if s3:
        import pyarrow.fs as pafs

        endpoint, key, secret, region = s3
        fs = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", access_key=key,
                               secret_key=secret, region=region)
    lock = acquire_run_lock(StorageContext(storage_path, name, storage_filesystem=fs))
    print(f"HELD {os.getpid()}", flush=True)
    sys.stdin.readline()
    lock.release()
    print("RELEASED", flush=True)


def run_fit(storage_path: str, name: str, signal_dir: str) -> None:
    import reference.train as t

    def train():
        for step in range(2):
            folder = os.path.join(signal_dir, f"ckpt-{step}")
            os.makedirs(folder)
            with open(os.path.join(folder, "w"), "w") as f:
                f.write(str(step))
            t.report({"step": step}, checkpoint=t.Checkpoint.from_directory(folder),
                     checkpoint_dir_name=f"step-{step}")
            if step == 0:
                open(os.path.join(signal_dir, "ready"), "w").close()
                deadline = time.monotonic() + WAIT_S
                while not os.path.exists(os.path.join(signal_dir, "go")):
                    if time.monotonic() > deadline:
                        raise TimeoutError("the test never created its 'go' file")
                    time.sleep(0.05)  # poll interval, with a deadline

    t.DataParallelTrainer(
        train, scaling_config=t.ScalingConfig(num_workers=1),
        run_config=t.RunConfig(storage_path=storage_path, name=name)).fit()
    print("DONE", flush=True)


if __name__ == "__main__":
    mode, storage_path, name, *rest = sys.argv[1:]
    if mode == "lock":
        hold_lock(storage_path, name, rest)
    else:
        run_fit(storage_path, name, rest[0])
