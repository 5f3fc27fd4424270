"""Frames and the cluster-secret handshake, shared by the driver, nodes, workers and clients.

Design note. A frame is a 5-byte header (payload length, kind) and the payload. A peer must
first complete a challenge-response handshake in raw bytes: nothing is unpickled before it,
and handshake frames are capped at `MAX_HANDSHAKE_FRAME` bytes, so garbage, a wrong secret,
a truncated frame or an absurd length costs the driver one closed connection.

    peer   -> driver   HELLO      MAGIC, role, 32-byte nonce, identity
    driver -> peer     CHALLENGE  32-byte nonce, HMAC(secret, "S" + hello + nonce)
    peer   -> driver   RESPONSE   HMAC(secret, "C" + hello + nonce)
    driver -> peer     WELCOME    (empty)

Both sides prove they know the secret (the peer checks the driver too), both nonces are
fresh, and the identity is inside the MAC, so a recorded handshake cannot be replayed for
another node or worker. After WELCOME, frames carry pickles (CTRL, MSG, RESULT, and on a
worker's socket FAULT driver -> worker and UPLOAD worker -> driver for fault plans): the
channel is authenticated, not encrypted, which is what loopback needs.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import io
import marshal
import os
import pickle
import socket
import struct
import types

import cloudpickle

from ._errors import AuthenticationError, ChannelClosed

HEADER = struct.Struct("!IB")
MAX_FRAME = 1 << 28
MAX_HANDSHAKE_FRAME = 256
MAGIC = b"SIMC1"
NONCE = 32

HELLO, CHALLENGE, RESPONSE, WELCOME = 1, 2, 3, 4
CTRL, MSG, RESULT, FAULT, UPLOAD = 10, 11, 12, 13, 14
ROLES = {b"N": "node", b"W": "worker", b"C": "client"}
_ROLE_BYTES = {v: k for k, v in ROLES.items()}


class ProtocolError(Exception):
    """A peer broke the framing or the handshake; its connection is closed."""


def _code_reduce(code: types.CodeType):
    # marshal keeps every field, co_filename included (cloudpickle >= 3.1 replaces it with
    # "<dynamic-code>", so a traceback from a worker lost the user's file and line). Both
    # sides run the same interpreter, which is what marshal needs.
    return marshal.loads, (marshal.dumps(code),)


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, except that functions pickled by value keep their source file name."""

    dispatch_table = collections.ChainMap({types.CodeType: _code_reduce},
                                          cloudpickle.Pickler.dispatch_table)


def dumps_by_value(obj: object) -> bytes:
    """cloudpickle's dumps (closures, lambdas, `__main__` by value), keeping the source file
    of every function's code so that tracebacks from the other side name it."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=5).dump(obj)
    return buffer.getvalue()


def dumps(obj: object) -> bytes:
    """Pickle for the other side. Closures, lambdas and anything from `__main__` must travel
    by value (cloudpickle); plain data goes through the C pickler, about 4x faster. Whatever
    the C pickler refuses, or would pickle by reference to `__main__`, goes to cloudpickle."""
    if not cloudpickle.list_registry_pickle_by_value():
        try:
            data = pickle.dumps(obj, protocol=5)
        except Exception:
            pass
        else:
            if b"__main__" not in data:
                return data
    return dumps_by_value(obj)


loads = pickle.loads


def frame(kind: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload), kind) + payload


class FrameReader:
    """Incremental frame parser for a non-blocking reader, linear in the bytes fed: a frame
    that arrives over many reads is copied once, into a buffer of the length its header
    announced (checked against `limit` before anything is allocated)."""

    def __init__(self, limit: int = MAX_HANDSHAKE_FRAME):
        self.limit = limit
        self._head = bytearray()            # a header split over reads (< HEADER.size bytes)
        self._body: bytearray | None = None  # the payload of a frame split over reads
        self._got = 0
        self._kind = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        out = []
        view = memoryview(data)
        pos, size = 0, len(view)
        while pos < size:
            if self._body is not None:
                n = min(size - pos, len(self._body) - self._got)
                self._body[self._got:self._got + n] = view[pos:pos + n]
                self._got += n
                pos += n
                if self._got == len(self._body):
                    out.append((self._kind, bytes(self._body)))
                    self._body, self._got = None, 0
                continue
            if self._head or size - pos < HEADER.size:
                take = min(HEADER.size - len(self._head), size - pos)
                self._head += view[pos:pos + take]
                pos += take
                if len(self._head) < HEADER.size:
                    break
                length, kind = HEADER.unpack(self._head)
                self._head.clear()
            else:
                length, kind = HEADER.unpack_from(view, pos)
                pos += HEADER.size
            if length > self.limit:
                raise ProtocolError(f"frame of {length} bytes exceeds the limit of {self.limit}")
            if size - pos >= length:  # the common case: the whole frame is in this read
                out.append((kind, bytes(view[pos:pos + length])))
                pos += length
            else:
                self._body, self._got, self._kind = bytearray(length), 0, kind
        return out

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._head) + self._got


# -- blocking helpers (nodes, workers, clients) ----------------------------------------------
def send_frame(sock: socket.socket, kind: int, payload: bytes = b"") -> None:
    try:
        if len(payload) > 65536:  # avoid copying big payloads into one buffer
            sock.sendall(HEADER.pack(len(payload), kind))
            sock.sendall(payload)
        else:
            sock.sendall(HEADER.pack(len(payload), kind) + payload)
    except OSError as exc:
        raise ChannelClosed(f"send failed: {exc}") from exc


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:])
        except (ConnectionError, OSError) as exc:
            if isinstance(exc, TimeoutError):
                raise
            raise ChannelClosed(f"connection lost: {exc}") from exc
        if not k:
            raise ChannelClosed("the other end closed the connection")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket, limit: int = MAX_FRAME) -> tuple[int, bytes]:
    length, kind = HEADER.unpack(_recv_exact(sock, HEADER.size))
    if length > limit:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit of {limit}")
    return kind, _recv_exact(sock, length) if length else b""


# -- handshake --------------------------------------------------------------------------------
def _mac(secret: bytes, tag: bytes, hello: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, tag + hello + nonce, hashlib.sha256).digest()


def client_handshake(sock: socket.socket, secret: bytes, role: str, ident: str) -> None:
    """Authenticate `sock` to the driver as `role`/`ident`; raises AuthenticationError."""
    hello = MAGIC + _ROLE_BYTES[role] + os.urandom(NONCE) + ident.encode()
    try:
        send_frame(sock, HELLO, hello)
        kind, payload = recv_frame(sock, MAX_HANDSHAKE_FRAME)
        if kind != CHALLENGE or len(payload) != 2 * NONCE:
            raise AuthenticationError("the driver sent no valid challenge")
        nonce, proof = payload[:NONCE], payload[NONCE:]
        if not hmac.compare_digest(proof, _mac(secret, b"S", hello, nonce)):
            raise AuthenticationError("the driver does not know the cluster secret")
        send_frame(sock, RESPONSE, _mac(secret, b"C", hello, nonce))
        kind, _ = recv_frame(sock, MAX_HANDSHAKE_FRAME)
    except (ChannelClosed, ProtocolError) as exc:
        raise AuthenticationError(f"the driver refused the handshake ({exc}); "
                                  "is the cluster secret right?") from exc
    if kind != WELCOME:
        raise AuthenticationError("the driver refused the handshake")


class ServerHandshake:
    """The driver's side of the handshake, fed one frame at a time."""

    def __init__(self, secret: bytes):
        self._secret = secret
        self._hello: bytes | None = None
        self._nonce = b""
        self.role = ""
        self.ident = ""

    def on_frame(self, kind: int, payload: bytes) -> tuple[bytes, bool]:
        """Returns (bytes to send, authenticated?); raises ProtocolError to refuse."""
        if self._hello is None:
            head = len(MAGIC) + 1 + NONCE
            if kind != HELLO or len(payload) <= head or not payload.startswith(MAGIC):
                raise ProtocolError("expected a HELLO frame")
            role = ROLES.get(payload[len(MAGIC):len(MAGIC) + 1])
            try:
                ident = payload[head:].decode("ascii")
            except UnicodeDecodeError:
                raise ProtocolError("identity is not ascii") from None
            if role is None or not ident.isprintable():
                raise ProtocolError("bad role or identity in HELLO")
            self._hello, self.role, self.ident = payload, role, ident
            self._nonce = os.urandom(NONCE)
            proof = _mac(self._secret, b"S", payload, self._nonce)
            return frame(CHALLENGE, self._nonce + proof), False
        if kind != RESPONSE or not hmac.compare_digest(
                payload, _mac(self._secret, b"C", self._hello, self._nonce)):
            raise ProtocolError("wrong cluster secret")
        return frame(WELCOME), True


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"address={address!r}: expected 'host:port' such as '127.0.0.1:41234'")
    return host, int(port)


# -- connecting and user messages -----------------------------------------------------------
def connect_socket(address: str, source: str | None = None, timeout: float = 10.0) -> socket.socket:
    """A blocking TCP connection to the driver, from `source` (the node's address) if given."""
    host, port = parse_address(address)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if source and source != host:
            try:
                sock.bind((source, 0))
            except OSError:
                pass  # not a local address here: connect from the default one
        sock.settimeout(timeout)
        sock.connect((host, port))
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def pack_message(obj: object, type_name: str | None = None) -> bytes:
    """A user message: its type name (for the history, readable without unpickling) + pickle."""
    name = (type_name or type(obj).__name__).encode("ascii", "replace")[:255]
    return bytes([len(name)]) + name + dumps(obj)


def message_type(payload: bytes) -> str:
    return payload[1:1 + payload[0]].decode("ascii", "replace")


def unpack_message(payload: bytes) -> object:
    return loads(payload[1 + payload[0]:])
