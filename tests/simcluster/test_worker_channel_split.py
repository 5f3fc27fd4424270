"""WorkerChannel.recv(accept=..., faults=...): two threads of a worker split the driver's
messages by type, and an injected error stays for the thread that is not serving calls."""

from __future__ import annotations

import socket
import threading

import pytest

from simcluster import ChannelClosed
from simcluster._wire import FAULT, MSG, dumps, pack_message, send_frame
from simcluster.node.worker_channel import WorkerChannel


class Call:
    pass


class Reply:
    pass


@pytest.fixture
def ends():
    driver, worker = socket.socketpair()
    yield driver, WorkerChannel(worker)
    driver.close()
    worker.close()


def test_two_readers_take_their_own_types_in_order(ends):
    driver, channel = ends
    for obj in (Reply(), Call(), Reply(), Call()):
        send_frame(driver, MSG, pack_message(obj))
    calls = []
    server = threading.Thread(target=lambda: calls.extend(
        channel.recv(5, accept=lambda kind: kind == "Call", faults=False) for _ in range(2)))
    server.start()
    replies = [channel.recv(5, accept=lambda kind: kind != "Call") for _ in range(2)]
    server.join(5)
    assert [type(m) for m in calls] == [Call, Call]
    assert [type(m) for m in replies] == [Reply, Reply]


def test_an_injected_error_waits_for_a_reader_that_takes_faults(ends):
    driver, channel = ends
    send_frame(driver, FAULT, dumps(("raise", "ValueError", "injected")))
    send_frame(driver, MSG, pack_message(Call()))
    assert isinstance(channel.recv(5, faults=False), Call)
    channel.send(Reply(), faults=False)  # no error either
    with pytest.raises(ValueError, match="injected"):
        channel.send(Reply())


def test_a_closed_channel_reaches_both_readers(ends):
    driver, channel = ends
    errors = []

    def serve():
        try:
            channel.recv(5, accept=lambda kind: kind == "Call", faults=False)
        except ChannelClosed as exc:
            errors.append(exc)

    server = threading.Thread(target=serve)
    server.start()
    driver.close()
    with pytest.raises(ChannelClosed):
        channel.recv(5, accept=lambda kind: kind != "Call")
    server.join(5)
    assert len(errors) == 1
