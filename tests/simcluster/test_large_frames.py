"""Large frames: reassembly costs time linear in the frame (a frame split over many reads is
copied once), through the reader every peer uses and through a real cluster's every hop."""

from __future__ import annotations

import hashlib
import random
import time

import pytest

import simcluster
from simcluster import NodeSpec, worker
from simcluster._wire import CTRL, MAX_FRAME, MSG, FrameReader, frame

slow = pytest.mark.slow
MIB = 1 << 20
# The driver's loop reads 256 KiB at a time. Reassembling 64 MiB took 10.8 s when each read
# copied what was held so far (quadratic); linear, it takes about 0.1 s.
READ = 1 << 18
BOUND_S = 2.0


def test_a_64_mib_frame_split_over_reads_arrives_intact_in_linear_time():
    payload = random.Random(0).randbytes(64 * MIB)
    data = memoryview(frame(MSG, payload) + frame(CTRL, b"after"))
    reader = FrameReader(MAX_FRAME)
    out = []
    # this thread's CPU time: what the reader costs, whatever else runs on the machine
    start = time.thread_time()
    for pos in range(0, len(data), READ):
        out += reader.feed(bytes(data[pos:pos + READ]))
        elapsed = time.thread_time() - start
        assert elapsed < BOUND_S, (f"reassembling {pos // MIB} of 64 MiB in {READ}-byte reads "
                                   f"took {elapsed:.1f} s of CPU already (bound {BOUND_S} s)")
    assert [kind for kind, _ in out] == [MSG, CTRL]
    assert out[0][1] == payload and out[1][1] == b"after" and reader.pending == 0
    assert all(type(p) is bytes for _, p in out)


def test_frames_split_anywhere_come_out_whole_and_in_order():
    rng = random.Random(1)
    frames = [(rng.choice([CTRL, MSG]), rng.randbytes(rng.choice([0, 1, 4, 5, 6, 300, 70000])))
              for _ in range(200)]
    data = b"".join(frame(kind, payload) for kind, payload in frames)
    reader = FrameReader(MAX_FRAME)
    out, pos = [], 0
    while pos < len(data):
        step = rng.choice([1, 2, 5, 7, 100, 4096, 100000])
        out += reader.feed(data[pos:pos + step])
        pos += step
    assert out == frames and reader.pending == 0


# -- through a real cluster ----------------------------------------------------------------
def echo_blob(blob: bytes):
    """Tell the digest of the argument, echo one message, stay until told to go."""
    ch = worker.channel()
    ch.send(hashlib.sha256(blob).hexdigest())
    ch.send(ch.recv())
    ch.recv()


@slow
def test_a_64_mib_message_crosses_every_reader_quickly(make_cluster):
    """client -> driver -> supervisor (a start argument), client -> driver -> worker and
    back to the client: each hop's reader is the one under test. Quadratic, each 64 MiB hop
    took 10-13 s; linear, all of them take about 2 s on a busy 2-core machine."""
    cluster = make_cluster(NodeSpec(cpus=1))
    blob = random.Random(2).randbytes(64 * MIB)
    digest = hashlib.sha256(blob).hexdigest()
    with simcluster.connect(cluster.address) as client:
        start = time.monotonic()
        w = client.start_worker(cluster.nodes[0].id, echo_blob, (blob,), timeout_s=3 * BOUND_S)
        ch = client.channel(w.id)
        assert ch.recv(timeout=3 * BOUND_S) == digest
        started = time.monotonic()
        ch.send(blob)
        assert ch.recv(timeout=3 * BOUND_S) == blob
        echoed = time.monotonic()
        ch.send("go")
        assert w.wait(10).ok
    assert started - start < 3 * BOUND_S and echoed - started < 3 * BOUND_S, (
        f"64 MiB start argument: {started - start:.1f} s, echo: {echoed - started:.1f} s")
