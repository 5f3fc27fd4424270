"""The driver's listener refuses bad peers, one connection at a time, and unpickles nothing
before a peer has authenticated."""

from __future__ import annotations

import os
import pickle
import socket
import struct

import pytest

from simcluster import AuthenticationError, NodeSpec, worker
from simcluster._keys import read_key
from simcluster._wire import (
    CHALLENGE,
    CTRL,
    HEADER,
    HELLO,
    MAGIC,
    NONCE,
    RESPONSE,
    FrameReader,
    ProtocolError,
    client_handshake,
    connect_socket,
    frame,
    parse_address,
    recv_frame,
)

slow = pytest.mark.slow


# -- pure framing ------------------------------------------------------------------------------
def test_frame_reader_reassembles_split_frames():
    reader = FrameReader(limit=100)
    data = frame(CTRL, b"hello") + frame(CTRL, b"world")
    out = []
    for i in range(len(data)):
        out += reader.feed(data[i:i + 1])
    assert out == [(CTRL, b"hello"), (CTRL, b"world")] and reader.pending == 0


def test_frame_reader_refuses_oversized_lengths_before_reading_them():
    reader = FrameReader(limit=100)
    with pytest.raises(ProtocolError, match="exceeds"):
        reader.feed(HEADER.pack(101, CTRL))


@pytest.mark.parametrize("address", ["localhost", "1.2.3.4:", ":80", "host:port"])
def test_bad_addresses(address):
    with pytest.raises(ValueError, match="host:port"):
        parse_address(address)


# -- against a live driver -----------------------------------------------------------------
class Evil:
    """Unpickling this would create a marker file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def echo():
    ch = worker.channel()
    while (msg := ch.recv()) is not None:
        ch.send(msg)


def raw(cluster) -> socket.socket:
    sock = socket.create_connection(parse_address(cluster.address), timeout=5)
    return sock


def refused(sock: socket.socket) -> bool:
    """True once the driver has closed this connection (EOF or reset), within 5 s."""
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    finally:
        sock.close()


def hello(ident="client-x", role=b"C"):
    return MAGIC + role + os.urandom(NONCE) + ident.encode()


@slow
def test_bad_peers_are_refused_and_others_keep_working(make_cluster, tmp_path):
    c = make_cluster(NodeSpec(cpus=1))
    w = c.start_worker(c.nodes[0].id, echo)
    ch = w.channel()
    marker = tmp_path / "pwned"
    evil = pickle.dumps(Evil(str(marker)))
    assert len(evil) < 256  # small enough to pass the handshake size limit

    cases = {
        "garbage": [os.urandom(64)],
        "oversized length": [struct.pack("!IB", 1 << 31, HELLO)],
        "pickle instead of HELLO": [frame(CTRL, evil)],
        "truncated frame": [HEADER.pack(100, HELLO) + b"0123456789"],
        "bad magic": [frame(HELLO, b"NOPE!" + b"C" + os.urandom(NONCE) + b"me")],
    }
    for name, chunks in cases.items():
        sock = raw(c)
        for chunk in chunks:
            sock.sendall(chunk)
        if name == "truncated frame":
            sock.shutdown(socket.SHUT_WR)  # the peer gives up mid-frame
        assert refused(sock), name

    # Wrong key: a correct HELLO, then a response MAC'd with the wrong secret.
    sock = raw(c)
    hi = hello()
    sock.sendall(frame(HELLO, hi))
    kind, challenge = recv_frame(sock, 256)
    assert kind == CHALLENGE
    import hashlib
    import hmac
    bad = hmac.new(b"wrong", b"C" + hi + challenge[:NONCE], hashlib.sha256).digest()
    sock.sendall(frame(RESPONSE, bad))
    assert refused(sock)

    # A pickle sent between HELLO and RESPONSE is not unpickled either.
    sock = raw(c)
    sock.sendall(frame(HELLO, hello()))
    recv_frame(sock, 256)
    sock.sendall(frame(CTRL, evil))
    assert refused(sock)

    # A real client with the wrong secret is told so.
    with pytest.raises(AuthenticationError):
        client_handshake(connect_socket(c.address), b"not the secret", "client", "c")
    # A correct secret but a worker identity nobody started.
    sock = connect_socket(c.address)
    client_handshake(sock, read_key(c.address), "worker", "worker-999 1")
    assert refused(sock)

    assert not marker.exists()
    ch.send("still here")
    assert ch.recv(timeout=10) == "still here"
    ch.send(None)
    assert w.wait(10).ok
