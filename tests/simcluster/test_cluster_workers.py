"""Workers on a live cluster: outcomes, environment, channels, callbacks, history."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from simcluster import ChannelClosed, NodeDownError, RemoteError, checkers, worker

pytestmark = pytest.mark.slow


def node_id(cluster, accelerator=None):
    return next(n.id for n in cluster.nodes if n.spec.accelerator == accelerator)


def test_return_value_args_kwargs_and_closures(shared_cluster):
    secret = {"k": 41}

    def fn(a, b=0):
        return secret["k"] + a + b, worker.current().worker_id

    w = shared_cluster.start_worker(node_id(shared_cluster), fn, (1,), {"b": 0}, name="adder")
    exit = w.wait(10)
    assert exit.ok and exit.code == 0 and exit.signal is None and exit.reason == "exited"
    assert exit.result == (42, w.id)
    assert (exit.worker_id, exit.name, exit.pid, exit.node_id) == (w.id, "adder", w.pid, w.node_id)


def test_exception_comes_back_with_its_traceback(shared_cluster):
    def failing_step():
        raise KeyError("missing")

    exit = shared_cluster.start_worker(node_id(shared_cluster), failing_step).wait(10)
    assert exit.code == 1 and not exit.ok
    assert isinstance(exit.error, KeyError) and exit.error.args == ("missing",)
    assert "failing_step" in exit.traceback


@pytest.mark.parametrize("how, code", [("sys.exit", 3), ("os._exit", 7), ("sys.exit-none", 0)])
def test_exit_codes(shared_cluster, how, code):
    def leave():
        if how == "sys.exit":
            sys.exit(3)
        if how == "os._exit":
            os._exit(7)
        sys.exit()

    exit = shared_cluster.start_worker(node_id(shared_cluster), leave).wait(10)
    assert (exit.code, exit.signal, exit.error, exit.result) == (code, None, None, None)


def test_signal_ends_a_worker(shared_cluster):
    w = shared_cluster.start_worker(node_id(shared_cluster), time.sleep, (60,))
    w.kill(signal.SIGTERM)
    exit = w.wait(10)
    assert (exit.code, exit.signal) == (None, signal.SIGTERM)


def test_unpicklable_result_becomes_a_remote_error(shared_cluster):
    exit = shared_cluster.start_worker(node_id(shared_cluster), threading.Lock).wait(10)
    assert isinstance(exit.error, RemoteError) and exit.code == 1


def test_environment_on_cuda_rocm_and_tpu_nodes(shared_cluster):
    def env():
        keys = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS",
                "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS", "SIMCLUSTER_NODE_ID",
                "SIMCLUSTER_NODE_ADDRESS", "SIMCLUSTER_ADDRESS", "SIMCLUSTER_WORKER_ID",
                "NODE_FLAVOUR", "MINE")
        return {k: os.environ[k] for k in keys if k in os.environ}

    c = shared_cluster
    cuda, rocm, tpu = node_id(c, "CUDA"), node_id(c, "ROCm"), node_id(c, "TPU")
    with c.place([{"GPU": 1}, {"GPU": 1}], "STRICT_PACK") as on_cuda, \
            c.place([{"GPU": 1}]) as on_rocm:
        assert on_cuda.node_ids == [cuda, cuda] and on_rocm.node_ids == [rocm]
        got = c.start_worker(None, env, bundle=1, placement=on_cuda,
                             env={"MINE": "x"}).wait(10).result
        assert got["CUDA_VISIBLE_DEVICES"] == str(on_cuda.gpu_ids[1][0])
        assert "HIP_VISIBLE_DEVICES" not in got
        assert got["MINE"] == "x" and got["SIMCLUSTER_NODE_ID"] == cuda
        assert got["SIMCLUSTER_ADDRESS"] == c.address
        assert got["SIMCLUSTER_NODE_ADDRESS"] == c.node(cuda).address
        assert got["SIMCLUSTER_WORKER_ID"].startswith("worker-")
        got = c.start_worker(None, env, bundle=on_rocm[0]).wait(10).result
        assert got["HIP_VISIBLE_DEVICES"] == str(on_rocm.gpu_ids[0][0])
        assert "CUDA_VISIBLE_DEVICES" not in got
    with c.place([{"TPU": 2}]) as p:
        assert p.node_ids == [tpu] and len(p.tpu_ids[0]) == 2
        got = c.start_worker(None, env, bundle=p[0]).wait(10).result
        assert got["TPU_VISIBLE_CHIPS"] == ",".join(str(i) for i in sorted(p.tpu_ids[0]))
        assert got["TPU_CHIPS_PER_HOST_BOUNDS"] == "1,2,1" and got["TPU_HOST_BOUNDS"] == "1,1,1"
    with c.place([{"TPU": 4}]) as p:  # the whole host: no TPU variables, as in Ray
        assert p.node_ids == [tpu] and p.tpu_ids == [[0, 1, 2, 3]]
        got = c.start_worker(None, env, bundle=p[0]).wait(10).result
        assert not {"TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS"} & set(got)
    # No bundle on an accelerator node: no devices. The node's own env is there.
    got = c.start_worker(cuda, env).wait(10).result
    assert got["CUDA_VISIBLE_DEVICES"] == "" and got["NODE_FLAVOUR"] == "cuda"
    # The caller's env wins over what simcluster sets.
    got = c.start_worker(cuda, env, env={"CUDA_VISIBLE_DEVICES": "7"}).wait(10).result
    assert got["CUDA_VISIBLE_DEVICES"] == "7"


def test_worker_info(shared_cluster):
    def info():
        me = worker.current()
        return me.worker_id, me.name, me.node_id, me.node_address, me.pid, me.cluster_address

    node = shared_cluster.nodes[0]
    w = shared_cluster.start_worker(node, info, name="probe")
    assert w.wait(10).result == (w.id, "probe", node.id, node.address, w.pid,
                                 shared_cluster.address)


def echo():
    ch = worker.channel()
    while (msg := ch.recv()) is not None:
        ch.send(msg)
    return "done"


def test_channel_round_trips_and_closes(shared_cluster):
    w = shared_cluster.start_worker(node_id(shared_cluster), echo)
    ch = w.channel()
    ch.send({"step": 1})          # may well be sent before the worker has connected
    assert ch.recv(timeout=10) == {"step": 1}
    big = b"x" * (8 << 20)        # larger than the socket buffers: the loop flushes the rest
    ch.send(big)
    assert ch.recv(timeout=10) == big
    with pytest.raises(TimeoutError):
        ch.recv(timeout=0.05)
    ch.send(None)
    assert w.wait(10).result == "done"
    with pytest.raises(ChannelClosed):
        ch.recv(timeout=10)
    with pytest.raises(ChannelClosed):
        ch.send("late")


def test_worker_recv_timeout_and_messages_to_callbacks(shared_cluster):
    def talk():
        ch = worker.channel()
        try:
            ch.recv(timeout=0.05)
        except TimeoutError:
            ch.send("timed out")
        ch.send(("answer", ch.recv(timeout=10)))

    got, arrived = [], threading.Event()

    def on_message(worker_id, obj):
        got.append((worker_id, obj))
        if obj == "timed out":
            shared_cluster.send(worker_id, 5)  # a callback may send: send never blocks
        if len(got) == 2:
            arrived.set()

    shared_cluster.on_message(on_message)
    try:
        w = shared_cluster.start_worker(node_id(shared_cluster), talk)
        assert w.wait(10).ok
        assert arrived.wait(10)
        assert got == [(w.id, "timed out"), (w.id, ("answer", 5))]
    finally:
        shared_cluster._message_callbacks.remove(on_message)


def test_on_worker_exit_fires_for_every_exit(shared_cluster):
    seen, event = [], threading.Event()

    def on_exit(exit):
        seen.append(exit)
        event.set()

    shared_cluster.on_worker_exit(on_exit)
    try:
        w = shared_cluster.start_worker(node_id(shared_cluster), time.sleep, (60,))
        os.kill(w.pid, signal.SIGKILL)  # a crash the cluster did not cause
        assert event.wait(5)
        assert [e.worker_id for e in seen] == [w.id] and seen[0].signal == signal.SIGKILL
    finally:
        shared_cluster._exit_callbacks.remove(on_exit)


def test_start_worker_argument_errors(shared_cluster):
    c = shared_cluster
    with pytest.raises(NodeDownError, match="node-99"):
        c.start_worker("node-99", print)
    with pytest.raises(ValueError, match="needs `placement=`"):
        c.start_worker(None, print, bundle=0)
    with pytest.raises(ValueError, match="node_id=None"):
        c.start_worker(None, print)
    with pytest.raises(TypeError, match="env="):
        c.start_worker(c.nodes[0].id, print, env={"A": 1})
    lock = threading.Lock()
    with pytest.raises(TypeError, match="cannot be pickled"):
        c.start_worker(c.nodes[0].id, lambda: lock)
    p = c.place([{"CPU": 1}])
    p.release()
    with pytest.raises(ValueError, match="released"):
        c.start_worker(None, print, bundle=p[0])


def test_history_records_workers_and_messages(shared_cluster):
    w = shared_cluster.start_worker(node_id(shared_cluster), echo)
    shared_cluster.send(w.id, [1, 2, 3])
    w.channel().recv(timeout=10)
    shared_cluster.send(w.id, None)
    w.wait(10)
    mine = [e for e in shared_cluster.history.events() if e.get("worker") == w.id]
    kinds = [(e["event"], e.get("direction")) for e in mine]
    assert kinds[0] == ("worker_start", None) and kinds[-1] == ("worker_exit", None)
    assert ("message", "to_worker") in kinds and ("message", "from_worker") in kinds
    msg = next(e for e in mine if e["event"] == "message")
    assert msg["type"] == "list" and msg["size"] > 0 and "payload" not in msg
    assert mine[-1]["code"] == 0 and mine[-1]["outcome"] == "ok"
    verdicts = checkers.check_all(shared_cluster.history.events())
    assert verdicts["no_worker_on_down_node"].valid and verdicts["never_oversubscribed"].valid


def test_blocking_calls_from_a_callback_are_refused_clearly(shared_cluster):
    errors, done = [], threading.Event()

    def restart(exit):
        try:
            shared_cluster.start_worker(exit.node_id, print)
        except RuntimeError as exc:
            errors.append(exc)
        done.set()

    shared_cluster.on_worker_exit(restart)
    try:
        shared_cluster.start_worker(node_id(shared_cluster), int)
        assert done.wait(10)
        assert "callback" in str(errors[0]) and "another thread" in str(errors[0])
    finally:
        shared_cluster._exit_callbacks.remove(restart)
