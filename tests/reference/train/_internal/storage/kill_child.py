"""The process that test_kill_during_persist.py kills: it persists and registers checkpoints.

Kept apart from the test module so that the child imports only this and the storage package.
The child can stop itself at its N-th filesystem mutation: a Python audit hook sees every
`open` for writing, rename, unlink, mkdir and rmdir the storage layer makes on local disk (it
uses `os`/`shutil` there, see fs_utils.py), tells the parent, and blocks inside the hook, i.e.
just before that operation happens, until the parent's SIGKILL arrives.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from typing import Optional

RANK_FILES = {0: ["model.bin", "optim.bin", "shared.txt"], 1: ["shared.txt", "rank1.bin"]}
BIG = 192 * 1024  # large enough for a copy to be interrupted mid-file


@dataclass
class Config:
    """A CheckpointConfig stand-in defined here, so unpickling it imports nothing heavier."""

    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"


def file_bytes(step: int, rank: int, name: str) -> bytes:
    size = BIG if name == "model.bin" else 1500 + 37 * step
    pattern = f"{step}:{rank}:{name};".encode()
    return (pattern * (size // len(pattern) + 1))[:size]


def expected_files(step: int) -> dict[str, bytes]:
    """The whole checkpoint of `step`: rank 1 is merged last, so it wins 'shared.txt'."""
    out = {}
    for rank in (0, 1):
        for name in RANK_FILES[rank]:
            out[name] = file_bytes(step, rank, name)
    return out


def step_of(dir_name: str) -> int:
    return int(dir_name.rsplit("_", 1)[1])


_MUTATING = {"os.rename", "os.remove", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.truncate"}


def _writes(event: str, args: tuple) -> bool:
    if event in _MUTATING:
        return True
    if event == "open" and len(args) >= 3:
        mode, flags = args[1], args[2]
        if isinstance(mode, str):
            return any(c in mode for c in "wax+")
        return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    return False


def child_main(root, scratch, config, scores, mode, stop_at, conn):
    """Persist and register one checkpoint per score; `stop_at` = N stops at the N-th write."""
    from reference.train._internal.storage import (
        CheckpointManager,
        StorageContext,
        persist_checkpoint,
    )

    count = [0]
    blocked = threading.Event()

    def hook(event, args):
        if stop_at is None or blocked.is_set() or not _writes(event, args):
            return
        count[0] += 1
        if count[0] == stop_at:
            blocked.set()
            conn.send_bytes(b"stopped")
            threading.Event().wait()  # until SIGKILL

    storage = StorageContext(root, "run")
    manager = CheckpointManager(storage, config)
    sys.addaudithook(hook)
    conn.send_bytes(b"started")
    for step, score in enumerate(scores):
        sources = []
        for rank in (0, 1):
            src = os.path.join(scratch, f"s{step}_r{rank}")
            os.makedirs(src)
            for name in RANK_FILES[rank]:
                with open(os.path.join(src, name), "wb") as f:
                    f.write(file_bytes(step, rank, name))
            sources.append(src)
        path = persist_checkpoint(storage, sources, f"ckpt_{step:03d}", mode=mode)
        manager.register_checkpoint(path, {"step": step, "score": score})
    conn.send_bytes(b"done:%d" % count[0])
