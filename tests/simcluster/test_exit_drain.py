"""A worker's last words survive its exit. The driver waits `FORCE_AFTER_S` after an exit for
the worker's socket to reach EOF; a loop made slow meanwhile has not read the megabytes the
worker wrote before it died (the EOF sits behind them), and a process that outlived the
worker may hold the socket open (no EOF at all). Either way, what the socket holds is still
read and delivered; a frame that can never be completed is dropped with a recorded reason,
and a socket that keeps delivering is not read forever.

The loop is made slow the way a user makes it slow: an `on_message` callback runs on the
cluster's event loop, and these take their time over some messages."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import signal
import socket
import time

import pytest
from simcluster_waits import gone, wait_until

from simcluster import NodeSpec, worker
from simcluster._wire import MSG, frame, pack_message
from simcluster.driver.worker_ops import DRAIN_MAX_S, DRAIN_STEP_S, FORCE_AFTER_S

slow = pytest.mark.slow
MIB = 1 << 20
BIG, PAD, TAIL = 32 * MIB, 1 * MIB, 2 * MIB
# What the worker sends, in order. While the callback sits on "big", the worker writes the
# rest (3 MiB: the kernel's socket buffers hold it) and exits; the padding is longer than
# three of the driver's 256 KiB reads, so "stall" is read after the exit has been seen, and
# the callback then sits on it past the driver's patience for EOF.
SENT = (("big", BIG), ("pad", PAD), ("stall", 0), ("tail", TAIL))
STALL_S = {"big": 0.3, "stall": FORCE_AFTER_S + 0.2}


def _hold_socket() -> int:
    """Fork a child that keeps this worker's socket open (it inherited it) for up to 30 s,
    where the node lets a worker's children outlive it."""
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    return child


def last_words(seed: int) -> str:
    ch = worker.channel()
    ch.send(("child", _hold_socket()))
    rng = random.Random(seed)
    for tag, size in SENT:
        ch.send((tag, rng.randbytes(size)))
    return "done"


def cut_short() -> None:
    """Hold the socket open from a child, then start a message the test kills us in."""
    ch = worker.channel()
    ch.send(("child", _hold_socket()))
    ch.send(("stall", b""))
    ch.send(("huge", bytes(64 * MIB)))


def hand_over_socket(path: str) -> None:
    """Give a duplicate of this worker's socket to the process listening at `path`."""
    host, _, port = os.environ["SIMCLUSTER_ADDRESS"].rpartition(":")
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # not a socket (or gone since the listing)
        with sock:
            try:
                if sock.getpeername() != (host, int(port)):
                    continue
            except OSError:
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
                unix.connect(path)
                socket.send_fds(unix, [b"fd"], [sock.fileno()])
                unix.recv(1)
            return
    raise RuntimeError(f"no socket connected to {host}:{port} among this worker's descriptors")


def _digest(body: bytes) -> tuple[int, str]:
    return len(body), hashlib.sha256(body).hexdigest()[:16]


class Listener:
    """An `on_message` callback (it runs on the cluster's event loop) that records what
    arrives, takes `stall_s[tag]` seconds over a message, then calls `on_stall` after a
    "stall", and collects the children to kill."""

    def __init__(self, stall_s: dict[str, float], on_stall=None):
        self.stall_s, self.on_stall = stall_s, on_stall
        self.got: list[tuple] = []
        self.children: list[int] = []

    def __call__(self, worker_id: str, msg) -> None:
        tag, body = msg
        if tag == "child":
            self.children.append(body)
            return
        self.got.append((tag, *_digest(body)))
        time.sleep(self.stall_s.get(tag, 0.0))
        if tag == "stall" and self.on_stall is not None:
            self.on_stall()

    def kill_children(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _worker_exit(cluster, worker_id: str) -> dict:
    (event,) = [e for e in cluster.history.events("worker_exit") if e["worker"] == worker_id]
    return event


@slow
def test_what_a_worker_wrote_before_exiting_arrives_though_the_loop_was_slow(make_cluster):
    cluster = make_cluster(NodeSpec(cpus=1))
    listener = cluster.on_message(Listener(STALL_S))
    try:
        w = cluster.start_worker(cluster.nodes[0].id, last_words, (7,))
        exit = w.wait(15)
    finally:
        listener.kill_children()
    rng = random.Random(7)
    expected = [(tag, *_digest(rng.randbytes(size))) for tag, size in SENT]
    assert listener.got == expected, (
        f"messages (tag, size, digest) {listener.got}, expected {expected} "
        f"[a worker that forked a child sent them, then exited, while an on_message "
        f"callback held the loop {STALL_S} s]")
    assert exit.ok and exit.result == "done", f"{exit!r}: expected code 0, result 'done'"
    assert "dropped" not in _worker_exit(cluster, w.id)


#: x86-64 and aarch64 numbers of the calls a blocked send sits in (write, sendto,
#: sendmsg, writev; aarch64: write 64, writev 66, sendto 206, sendmsg 211)
SEND_CALLS = {"1", "20", "44", "46", "64", "66", "206", "211"}


def _kill_inside_send(pid: int, timeout_s: float = 10.0) -> None:
    """SIGKILL `pid` once a thread of it is blocked in a send (/proc/<pid>/task/*/syscall), so
    part of its frame is in the socket and the rest never comes; on a loaded machine the
    worker may take a while to get there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        calls = set()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):  # whichever thread sends
                with open(f"/proc/{pid}/task/{task}/syscall") as f:
                    calls.add(f.read().split(" ", 1)[0])
        except OSError:
            break
        if calls & SEND_CALLS:
            break
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)


@slow
def test_a_frame_cut_short_by_a_kill_is_dropped_with_a_reason(make_cluster):
    cluster = make_cluster(NodeSpec(cpus=1))
    handles = []
    # The kill lands while the worker is inside its 64 MiB send (the loop, sitting in this
    # callback, reads nothing meanwhile): that frame can never be completed.
    listener = cluster.on_message(Listener(
        {"stall": 0.3}, on_stall=lambda: _kill_inside_send(handles[0].pid)))
    try:
        handles.append(cluster.start_worker(cluster.nodes[0].id, cut_short))
        exit = handles[0].wait(15)
    finally:
        listener.kill_children()
    assert exit.signal == signal.SIGKILL and exit.result is None, repr(exit)
    assert [tag for tag, *_ in listener.got] == ["stall"]
    dropped = _worker_exit(cluster, handles[0].id).get("dropped")
    assert dropped and 0 < dropped["bytes"] < 64 * MIB and "incomplete" in dropped["why"], (
        f"worker_exit's dropped={dropped!r}: expected the bytes held of the incomplete "
        f"64 MiB frame and why they were dropped")


def _chatter(fd: int, failed, stats) -> None:
    """A message every 5 ms into the worker's socket, until the driver closes its end;
    `stats` gets (messages sent, the longest pause between two sends, from the start on).
    A forked child holds every descriptor of this process, the driver's end of that socket
    among them (the driver runs here), which would keep it open: all but `fd` are closed."""
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    try:
        os.nice(-10)  # a larger share of a loaded machine, so that it does not pause (root)
    except OSError:
        pass
    held = socket.socket(fileno=fd)
    last = time.monotonic()
    deadline = last + 10
    try:
        while last < deadline:
            held.sendall(frame(MSG, pack_message(("chatter", b"x" * 1024))))
            now = time.monotonic()
            stats[0], stats[1] = stats[0] + 1, max(stats[1], now - last)
            last = now
            time.sleep(0.005)
    except OSError:
        failed.set()  # the driver closed its end


def _keep_delivering(cluster, tmp_path, attempt: int):
    """One worker hands its socket over and exits; a child process writes into the socket
    from then on. (worker id, exit, seconds to the exit, messages sent, longest pause)."""
    path = str(tmp_path / f"fd{attempt}.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        unix.bind(path)
        unix.listen(1)
        unix.settimeout(10)
        w = cluster.start_worker(cluster.nodes[0].id, hand_over_socket, (path,))
        peer, _ = unix.accept()
        with peer:
            _, fds, _, _ = socket.recv_fds(peer, 16, 1)
            peer.sendall(b"k")
    held = socket.socket(fileno=fds[0])
    ctx = multiprocessing.get_context("fork")
    writes_failed, stats = ctx.Event(), ctx.Array("d", 2)
    writer = ctx.Process(target=_chatter, args=(held.fileno(), writes_failed, stats),
                         daemon=True)
    try:
        wait_until(lambda: gone(w.pid), 10, f"the exit of worker pid {w.pid}")
        start = time.monotonic()
        writer.start()  # only now: frames of two writers must not interleave
        exit = w.wait(FORCE_AFTER_S + DRAIN_MAX_S + 5)
        took = time.monotonic() - start
        assert writes_failed.wait(5), "the driver never closed the worker's socket"
    finally:
        held.close()
        if writer.pid is not None:
            writer.join(10)
            if writer.is_alive():
                writer.kill()
                writer.join(5)
    return w.id, exit, took, int(stats[0]), stats[1]


@slow
def test_a_socket_that_keeps_delivering_after_the_exit_is_closed_within_a_bound(
        make_cluster, tmp_path):
    """The worker hands its socket to this process, which goes on writing to it (a
    message every 5 ms, from a child process) after the worker is gone. The driver closes
    a socket as quiet once nothing came for DRAIN_STEP_S (50 ms): a writer that paused that
    long (on a loaded machine, a busy process can), or started too late to send 20 messages
    (100 ms) before the socket was closed, did not keep it delivering, and its attempt proves
    nothing either way; the next attempt runs instead."""
    cluster = make_cluster(NodeSpec(cpus=1))
    listener = cluster.on_message(Listener({}))
    pauses = []
    for attempt in range(5):
        worker_id, exit, took, sent, pause = _keep_delivering(cluster, tmp_path, attempt)
        assert exit.ok, repr(exit)
        # the bound plus room for a loaded machine; without it the exit would wait for the
        # writer's 10 s
        assert took < FORCE_AFTER_S + DRAIN_MAX_S + 3, (
            f"the exit took {took:.1f} s (FORCE_AFTER_S={FORCE_AFTER_S}, "
            f"DRAIN_MAX_S={DRAIN_MAX_S})")
        if sent >= 20 and pause < DRAIN_STEP_S:
            break
        pauses.append((sent, round(pause, 3)))
    else:
        pytest.skip(f"the writer sent fewer than 20 messages or paused >= {DRAIN_STEP_S} s "
                    f"in every attempt ((sent, longest pause): {pauses}): this machine is too "
                    "loaded to keep a socket delivering")
    assert any(tag == "chatter" for tag, *_ in listener.got), "nothing the writer sent arrived"
    dropped = _worker_exit(cluster, worker_id).get("dropped")
    assert dropped and "still" in dropped["why"], (
        f"worker_exit's dropped={dropped!r}: expected why the socket was closed while it "
        f"still delivered (the writer sent {sent} messages, pausing at most {pause:.3f} s)")
