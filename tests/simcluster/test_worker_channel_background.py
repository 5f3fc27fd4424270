"""WorkerChannel.recv(background=True): the thread serving calls leaves the socket to a
thread that waits for a reply, so the reply wakes that thread directly (no thread switch
through the background reader), and calls it reads still reach the serving thread."""

from __future__ import annotations

import socket
import threading
import time

from simcluster import ChannelClosed
from simcluster._wire import MSG, pack_message, send_frame
from simcluster.node.worker_channel import WorkerChannel

DEADLINE_S = 5.0


class Call:
    pass


class Reply:
    pass


class Recording:
    """A socket that records which thread each recv() ran on (the channel only needs
    recv, sendall and fileno)."""

    def __init__(self, sock):
        self.sock, self.reads = sock, []

    def fileno(self):
        return self.sock.fileno()

    def sendall(self, data):
        self.sock.sendall(data)

    def recv(self, n, flags=0):
        data = self.sock.recv(n, flags)
        self.reads.append((threading.current_thread().name, data))
        return data

    def read_by(self, marker: bytes) -> list[str]:
        return [name for name, data in self.reads if marker in data]


def wait_until(condition, what):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def send_once(channel, driver, obj, condition):
    """Send `obj` from the driver's end once `condition()` holds, on a thread of its own."""
    def run():
        wait_until(condition, f"never ready to send {type(obj).__name__}")
        send_frame(driver, MSG, pack_message(obj))

    threading.Thread(target=run, daemon=True).start()


def test_a_background_reader_leaves_the_socket_to_a_thread_that_waits():
    driver, worker = socket.socketpair()
    sock = Recording(worker)
    channel = WorkerChannel(sock)
    calls = []

    def serve():
        try:
            while True:
                calls.append(channel.recv(accept=lambda kind: kind == "Call", faults=False,
                                          background=True))
        except ChannelClosed:
            pass

    def waiter_reads():  # the waiting thread holds the socket
        return channel._reading and not channel._background_reads

    server = threading.Thread(target=serve, name="calls", daemon=True)
    try:
        server.start()
        send_frame(driver, MSG, pack_message(Call()))
        wait_until(lambda: calls, "the background thread never served the call")
        wait_until(lambda: channel._background_reads, "the background thread never read")
        # The background thread reads when this thread starts to wait: it gives the
        # socket up, and the reply is read by this thread itself.
        send_once(channel, driver, Reply(), waiter_reads)
        assert isinstance(channel.recv(DEADLINE_S, accept=lambda kind: kind != "Call"), Reply)
        assert sock.read_by(b"Reply") == ["MainThread"]
        # A call that arrives while this thread reads reaches the serving thread.
        send_once(channel, driver, Call(), waiter_reads)
        send_once(channel, driver, Reply(), lambda: len(calls) == 2)
        assert isinstance(channel.recv(DEADLINE_S, accept=lambda kind: kind != "Call"), Reply)
        assert sock.read_by(b"Call")[-1] == "MainThread"
        # Once nobody waits, the background thread reads again (after the grace).
        send_frame(driver, MSG, pack_message(Call()))
        wait_until(lambda: len(calls) == 3, "the third call was not served")
        assert sock.read_by(b"Call")[-1] == "calls"
    finally:
        driver.close()
        server.join(DEADLINE_S)
        worker.close()
