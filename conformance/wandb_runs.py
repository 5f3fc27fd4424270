"""W&B's offline runs read back (the tracker checks and the tests of
`air.integrations.wandb`): the records of a run file (`run-<id>.wandb`), read with W&B's
protobuf classes: a 7-byte header (":W&B", magic, version), then LevelDB-style log blocks
of 32 KiB, each record a 7-byte header (CRC, length, type: full, first, middle, last) and
data. `runs(experiment folder)` gives each trial folder's run: id, name, group, project,
config, history rows and summary."""

from __future__ import annotations

import glob
import json
import os
import struct

BLOCK, HEADER = 32 * 1024, 7


def _chunks(data: bytes):
    pos, out = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - (pos % BLOCK)
        if left < HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        body = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            continue
        out = body if kind in (1, 2) else out + body
        if kind in (1, 4):
            yield out
            out = b""


def read_run(path: str) -> dict:
    from wandb.proto import wandb_internal_pb2 as pb

    def key(item):
        return item.key or "/".join(item.nested_key)

    out = {"run": {}, "config": {}, "history": [], "summary": {}}
    with open(path, "rb") as f:
        data = f.read()
    for raw in _chunks(data):
        rec = pb.Record()
        rec.ParseFromString(raw)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["run"] = {"id": rec.run.run_id, "name": rec.run.display_name,
                          "group": rec.run.run_group, "project": rec.run.project}
            updates = rec.run.config.update
        elif kind == "config":
            updates = rec.config.update
        elif kind == "history":
            out["history"].append({key(i): json.loads(i.value_json) for i in rec.history.item})
            continue
        elif kind == "summary":
            out["summary"].update({key(i): json.loads(i.value_json) for i in rec.summary.update})
            continue
        else:
            continue
        out["config"].update({key(i): json.loads(i.value_json) for i in updates})
    return out


def runs(folder: str) -> dict:
    """{trial folder name: run} of the offline W&B runs under a Tune experiment folder."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "*", "wandb", "offline-run-*",
                                              "run-*.wandb"))):
        found[path.split(os.sep)[-4]] = read_run(path)
    return found
