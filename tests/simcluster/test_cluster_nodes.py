"""Node faults and elastic membership on a live cluster; placement waiting on events."""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

import pytest
from simcluster_waits import gone, wait_until

from simcluster import (
    Cluster,
    NodeDownError,
    NodeSpec,
    PlacementTimeout,
    Unschedulable,
    WorkerStartError,
    checkers,
    worker,
)
from simcluster.procfs import state as proc_state

pytestmark = pytest.mark.slow


def sleeper():
    time.sleep(60)


def echo():
    ch = worker.channel()
    while (msg := ch.recv()) is not None:
        ch.send(msg)


def test_kill_node_loses_its_workers_and_resources(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    victim, other = c.nodes
    exits = []
    c.on_worker_exit(exits.append)
    lost = [c.start_worker(victim.id, sleeper) for _ in range(2)]
    kept = c.start_worker(other.id, sleeper)
    supervisor = victim.pid
    c.kill_node(victim)
    # kill_node returns once the node is down and its exits were delivered.
    assert victim.state == "down" and c.node(victim.id).state == "down"
    assert sorted(e.worker_id for e in exits) == sorted(w.id for w in lost)
    for w in lost:
        assert (w.exit.reason, w.exit.signal, w.exit.code) == ("node_lost", signal.SIGKILL, None)
    assert kept.exit is None
    assert c.total_resources() == {"CPU": 2.0}
    wait_until(lambda: all(gone(p) for p in [supervisor] + [w.pid for w in lost]),
               what="killed node's processes gone")
    with pytest.raises(NodeDownError):
        c.start_worker(victim.id, sleeper)
    with pytest.raises(NodeDownError):
        c.pause_node(victim)
    events = c.history.events()
    assert {"event": "fault", "action": "kill_node", "node": victim.id}.items() <= \
        next(e for e in events if e["event"] == "fault").items()
    assert next(e for e in events if e["event"] == "node_down")["reason"] == "killed"


def test_pause_and_resume_freeze_the_node(make_cluster):
    c = make_cluster(NodeSpec(cpus=2))
    node = c.nodes[0]
    w = c.start_worker(node.id, echo)
    ch = w.channel()
    ch.send(1)
    assert ch.recv(timeout=10) == 1
    c.pause_node(node)
    assert node.state == "paused"
    assert proc_state(node.pid) == "T" and proc_state(w.pid) == "T"
    ch.send(2)
    with pytest.raises(TimeoutError):
        ch.recv(timeout=0.2)  # frozen workers answer nothing
    with pytest.raises(WorkerStartError, match="paused"):
        c.start_worker(node.id, sleeper, timeout_s=0.3)
    c.resume_node(node)
    assert node.state == "up"
    assert ch.recv(timeout=10) == 2
    ch.send(None)
    assert w.wait(10).ok
    names = [e["event"] for e in c.history.events()]
    assert names.index("node_paused") < names.index("node_resumed")


def test_remove_node_gracefully_then_forcefully(make_cluster):
    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1), NodeSpec(cpus=1))

    def stubborn():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        worker.channel().send("ready")
        time.sleep(60)

    polite = c.start_worker(c.nodes[0].id, sleeper)
    c.remove_node(c.nodes[0], graceful=True, grace_s=5)
    assert polite.exit.signal == signal.SIGTERM and polite.exit.reason == "exited"

    w = c.start_worker(c.nodes[1].id, stubborn)
    assert w.channel().recv(timeout=10) == "ready"
    t = time.monotonic()
    c.remove_node(c.nodes[1], graceful=True, grace_s=0.3)
    assert w.exit.signal == signal.SIGKILL and time.monotonic() - t >= 0.3

    w = c.start_worker(c.nodes[2].id, sleeper)
    c.remove_node(c.nodes[2], graceful=False)
    assert w.exit.signal == signal.SIGKILL
    assert [n.state for n in c.nodes] == ["down"] * 3
    reasons = [e["reason"] for e in c.history.events("node_down")]
    assert reasons == ["removed"] * 3


def _blocked_waiters(c) -> int:
    # Threads inside the driver's Condition.wait: a placement waiter is parked there, with
    # its whole timeout_s as the wait, until a release or a new node notifies it.
    return len(c._driver.cond._waiters)


def test_add_node_and_release_wake_a_waiting_placement(make_cluster):
    """A waiter wakes on the event itself, not on a periodic re-check. Its wait is its whole
    timeout (600 s), and over ten hand-offs the median delay from release() returning to the
    waiter's place() returning stays under 0.1 s; a 1 s re-check would show a median near
    0.5 s (the chance that six of ten 1 s polls land within 0.1 s is about 1e-4)."""
    c = make_cluster(NodeSpec(cpus=2))
    held = c.place([{"CPU": 2}])
    got: queue.Queue = queue.Queue()

    def waiter(rounds):
        for _ in range(rounds):
            placement = c.place([{"CPU": 2}], timeout_s=600)
            got.put((placement, time.monotonic()))

    def blocked():
        wait_until(lambda: _blocked_waiters(c) == 1, what="a waiter blocked in place()")

    thread = threading.Thread(target=waiter, args=(11,), daemon=True)
    thread.start()
    blocked()
    added = c.add_node(NodeSpec(cpus=2))
    added_at = time.monotonic()
    placement, woke = got.get(timeout=10)
    assert placement.node_ids == [added.id]
    assert woke - added_at < 0.1  # woken while add_node() returned, not a poll later
    spare = placement  # stays held: the hand-offs below pass node-0's placement around

    delays = []
    for _ in range(10):
        blocked()
        released = time.monotonic()
        held.release()
        held, woke = got.get(timeout=10)
        delays.append(woke - released)
    thread.join(10)
    assert not thread.is_alive()
    delays.sort()
    assert delays[len(delays) // 2] < 0.1, f"hand-off delays (s): {delays}"
    spare.release()
    held.release()
    assert c.available_resources() == {"CPU": 4.0}


def test_unschedulable_at_once_and_timeout_later(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2, gpus=1))
    t = time.monotonic()
    with pytest.raises(Unschedulable, match=r"never.*node-0.*node-1"):
        c.place([{"CPU": 3}], timeout_s=30)
    with pytest.raises(Unschedulable):
        c.place([{"CPU": 1}] * 3, strategy="STRICT_SPREAD", timeout_s=30)
    assert time.monotonic() - t < 10  # at once: far below timeout_s, also on a loaded machine
    with pytest.raises(ValueError, match="strategy='RANDOM'"):
        c.place([{"CPU": 1}], strategy="RANDOM")
    held = c.place([{"CPU": 2, "GPU": 1}])
    with pytest.raises(PlacementTimeout, match="timeout_s=0.2"):
        c.place([{"GPU": 1}], timeout_s=0.2)
    held.release()


def test_a_waiter_fails_at_once_when_its_request_can_no_longer_fit(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    c.place([{"CPU": 2}], strategy="PACK")
    errors = []

    def wait_spread():
        try:
            c.place([{"CPU": 1}] * 2, strategy="STRICT_SPREAD", timeout_s=30)
        except Exception as exc:
            errors.append(exc)

    waiter = threading.Thread(target=wait_spread)
    waiter.start()
    wait_until(lambda: _blocked_waiters(c) == 1, what="a waiter blocked in place()")
    removed_at = time.monotonic()
    c.remove_node(c.nodes[1])
    waiter.join(10)
    assert not waiter.is_alive() and time.monotonic() - removed_at < 5
    assert isinstance(errors[0], Unschedulable) and not isinstance(errors[0], TimeoutError)


def test_history_of_a_faulty_run_is_valid(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    with c.place([{"CPU": 1}] * 2, strategy="STRICT_SPREAD") as p:
        workers = [c.start_worker(None, sleeper, bundle=p[i]) for i in range(2)]
        c.pause_node(c.nodes[0])
        c.resume_node(c.nodes[0])
        assert [w.node_id for w in workers] == [c.nodes[0].id, c.nodes[1].id]
        c.kill_node(c.nodes[1])
        workers[0].kill()
        workers[0].wait(10)
    c.add_node(NodeSpec(cpus=1))
    c.close()
    verdicts = checkers.check_all(c.history.events())
    assert all(v.valid for v in verdicts.values()), verdicts
    names = [e["event"] for e in c.history.events()]
    for name in ("node_up", "node_paused", "node_resumed", "node_down", "worker_start",
                 "worker_exit", "worker_signal", "placement", "placement_released", "fault",
                 "cluster_stop"):
        assert name in names, name


def test_unknown_provider_is_refused():
    with pytest.raises(ValueError, match=r"provider='vm'.*'process'"):
        Cluster(nodes=[NodeSpec()], provider="vm")


def test_a_node_that_dies_on_its_own_is_lost(make_cluster):
    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1))
    down = threading.Event()
    c.on_worker_exit(lambda exit: down.set())
    w = c.start_worker(c.nodes[0].id, sleeper)
    os.kill(c.nodes[0].pid, signal.SIGKILL)  # the supervisor alone: its worker follows it
    assert down.wait(10)
    assert (w.exit.reason, w.exit.signal) == ("node_lost", signal.SIGKILL)
    assert c.nodes[0].state == "down"
    assert c.history.events("node_down")[0]["reason"] == "lost"
    wait_until(lambda: gone(w.pid), what="the orphaned worker gone")


def test_nodes_survive_nothing_of_a_dead_factory_and_new_ones_still_start(make_cluster):
    c = make_cluster(NodeSpec(cpus=1))
    factory = c._driver.factory._proc.pid
    supervisor = c.nodes[0].pid
    os.kill(factory, signal.SIGKILL)
    wait_until(lambda: c.nodes[0].state == "down", what="node lost with its factory")
    wait_until(lambda: gone(supervisor), what="supervisor gone")
    node = c.add_node(NodeSpec(cpus=2))  # a new factory
    assert c.start_worker(node.id, int, ("5",)).wait(10).result == 5


def test_preloaded_modules_are_imported_once_for_every_node(make_cluster):
    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1), preload=["colorsys"])

    def preloaded():
        import sys

        return "colorsys" in sys.modules

    assert all(c.start_worker(n.id, preloaded).wait(10).result for n in c.nodes)
