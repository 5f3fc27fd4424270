"""simcluster benchmark (not a test): scale, worker start, message round trip.

    python ci/bench/simcluster_bench.py [--nodes 64] [--workers-per-node 4] [--messages 10]
                                        [--rtt-samples 3000] [--skip-scale] [--skip-compare]

Prints
  (a) N nodes x K workers: cluster start, worker starts, M round trips each, worker exits and
      shutdown (wall time per phase), and the peak memory of all processes while every
      worker is alive (RSS sum, and PSS sum, which counts shared pages once), and the memory
      of one idle worker (its private pages: what each more worker costs);
  (b) median round trip driver <-> worker (Cluster and connect() client) beside a bare
      loopback TCP round trip measured in the same run, and on_worker_exit latency;
  (c) time from "start" to "first message from the new process" for start_worker (fork from
      a warm supervisor) and for the standard library's spawn and forkserver start methods.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import simcluster  # noqa: E402
from simcluster import Cluster, NodeSpec, worker  # noqa: E402


def echo(rounds: int | None = None):
    ch = worker.channel()
    n = 0
    while rounds is None or n < rounds:
        msg = ch.recv()
        if msg is None:
            break
        ch.send(msg)
        n += 1
    return n


def say_hello():
    worker.channel().send("hello")


def sleep_forever():
    time.sleep(3600)


def _kb(path: str, field: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_mb(pids) -> tuple[float, float]:
    rss = sum(_kb(f"/proc/{p}/status", "VmRSS:") for p in pids)
    pss = sum(_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
    return rss / 1024, pss / 1024


def idle_worker_kb(pids) -> tuple[float, float]:
    """Mean private memory (pages of its own: what each more worker costs) and mean PSS of
    idle workers, in KB."""
    private = [_kb(f"/proc/{p}/smaps_rollup", "Private_Clean:")
               + _kb(f"/proc/{p}/smaps_rollup", "Private_Dirty:") for p in pids]
    pss = [_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids]
    return statistics.mean(private), statistics.mean(pss)


def med_us(samples) -> float:
    return statistics.median(samples) * 1e6


# -- (a) scale ---------------------------------------------------------------------------------
def scale(n_nodes: int, per_node: int, messages: int) -> None:
    print(f"(a) {n_nodes} nodes x {per_node} workers, {messages} round trips each")
    t0 = time.perf_counter()
    cluster = Cluster(nodes=[NodeSpec(cpus=per_node)] * n_nodes)
    t1 = time.perf_counter()
    starts = []
    handles = []
    for node in cluster.nodes:
        for _ in range(per_node):
            s = time.perf_counter()
            handles.append(cluster.start_worker(node.id, echo, (messages,)))
            starts.append(time.perf_counter() - s)
    t2 = time.perf_counter()
    pids = [os.getpid()] + [n.pid for n in cluster.nodes] + [h.pid for h in handles]
    rss, pss = memory_mb(pids)
    per_private, per_pss = idle_worker_kb([h.pid for h in handles])
    channels = [cluster.channel(h.id) for h in handles]
    for i in range(messages):
        for ch in channels:
            ch.send(i)
        for ch in channels:
            assert ch.recv(timeout=30) == i
    t3 = time.perf_counter()
    exits = [h.wait(30) for h in handles]
    assert all(e.ok and e.result == messages for e in exits), exits[:3]
    t4 = time.perf_counter()
    cluster.close()
    t5 = time.perf_counter()
    print(f"    cluster start   {t1 - t0:8.3f} s  ({n_nodes} supervisors)")
    print(f"    worker starts   {t2 - t1:8.3f} s  (median {med_us(starts) / 1e3:.2f} ms, "
          f"p90 {sorted(starts)[int(len(starts) * 0.9)] * 1e3:.2f} ms per start_worker)")
    print(f"    messages        {t3 - t2:8.3f} s  ({len(handles) * messages} round trips)")
    print(f"    worker exits    {t4 - t3:8.3f} s")
    print(f"    shutdown        {t5 - t4:8.3f} s")
    print(f"    total wall      {t5 - t0:8.3f} s")
    print(f"    peak memory     RSS sum {rss:8.0f} MB, PSS sum {pss:8.0f} MB "
          f"over {len(pids)} processes (driver + supervisors + workers)")
    print(f"    idle worker     {per_private / 1024:8.2f} MB private, {per_pss / 1024:.2f} MB PSS "
          "(mean over the workers, waiting for their first message)")


# -- (b) round trips ---------------------------------------------------------------------------
class BareEcho:
    """A forked process echoing raw bytes over loopback TCP. Created before any cluster:
    forking a process that already runs threads is asking for trouble."""

    def __init__(self):
        listener = socket.create_server(("127.0.0.1", 0))
        self.pid = os.fork()
        if self.pid == 0:
            conn = socket.create_connection(listener.getsockname())
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(65536):
                conn.sendall(data)
            os._exit(0)
        self.conn, _ = listener.accept()
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listener.close()

    def batch(self, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            self.conn.sendall(b"x" * 32)
            self.conn.recv(65536)
            out.append(time.perf_counter() - t)
        return out

    def close(self) -> None:
        self.conn.close()
        os.waitpid(self.pid, 0)


class Echoer:
    """A simcluster worker echoing messages, driven through `endpoint`'s channel."""

    def __init__(self, endpoint, node_id: str):
        self.worker = endpoint.start_worker(node_id, echo)
        self.ch = endpoint.channel(self.worker.id)

    def batch(self, n: int) -> list[float]:
        out = []
        for i in range(n):
            t = time.perf_counter()
            self.ch.send(i)
            self.ch.recv(timeout=10)
            out.append(time.perf_counter() - t)
        return out

    def close(self) -> None:
        self.ch.send(None)
        self.worker.wait(10)


def interleaved(samples: int, **peers) -> dict[str, float]:
    """Median round trip of each peer, measured in alternating batches so that all of them
    see the same machine (load on a shared box comes and goes)."""
    times: dict[str, list[float]] = {name: [] for name in peers}
    for peer in peers.values():
        peer.batch(100)  # warm up
    for _ in range(10):
        for name, peer in peers.items():
            times[name] += peer.batch(samples // 10)
    return {name: med_us(t) for name, t in times.items()}


def exit_latency(cluster: Cluster, node_id: str, samples: int = 30) -> float:
    seen: dict[str, float] = {}
    done = threading.Event()

    def on_exit(exit):
        seen[exit.worker_id] = time.perf_counter()
        done.set()

    cluster.on_worker_exit(on_exit)
    out = []
    for _ in range(samples):
        w = cluster.start_worker(node_id, sleep_forever)
        done.clear()
        t = time.perf_counter()
        os.kill(w.pid, signal.SIGKILL)  # directly, as a crash would
        done.wait(5)
        out.append(seen[w.id] - t)
    return med_us(out)


def round_trips(samples: int) -> None:
    print("(b) round trips (median; bare and channels measured in alternating batches)")
    bare = BareEcho()
    with Cluster(nodes=[NodeSpec(cpus=2)]) as cluster:
        node = cluster.nodes[0].id
        with simcluster.connect(cluster.address) as client:
            local, remote = Echoer(cluster, node), Echoer(client, node)
            got = interleaved(samples, bare=bare, local=local, remote=remote)
            local.close()
            remote.close()
        exit_us = exit_latency(cluster, node)
    bare.close()
    print(f"    bare loopback TCP        {got['bare']:8.1f} us")
    print(f"    Cluster channel          {got['local']:8.1f} us  ({got['local'] / got['bare']:.1f}x bare)")
    print(f"    connect() client channel {got['remote']:8.1f} us  "
          f"({got['remote'] / got['bare']:.1f}x bare)")
    print(f"    on_worker_exit latency   {exit_us:8.1f} us  (SIGKILL -> callback)")


# -- (c) start methods -------------------------------------------------------------------------
def _mp_child(conn):
    conn.send("hello")


def mp_start(method: str, samples: int) -> float:
    ctx = multiprocessing.get_context(method)
    out = []
    for _ in range(samples):
        parent, child = ctx.Pipe()
        t = time.perf_counter()
        p = ctx.Process(target=_mp_child, args=(child,))
        p.start()
        parent.recv()
        out.append(time.perf_counter() - t)
        p.join()
    return med_us(out) / 1e3


def start_times(samples: int) -> None:
    print("(c) start -> first message from the new process (median)")
    with Cluster(nodes=[NodeSpec(cpus=2)]) as cluster:
        node = cluster.nodes[0].id
        out = []
        for _ in range(samples):
            t = time.perf_counter()
            w = cluster.start_worker(node, say_hello)
            cluster.channel(w.id).recv(timeout=10)
            out.append(time.perf_counter() - t)
            w.wait(10)
        print(f"    simcluster start_worker  {med_us(out) / 1e3:8.2f} ms (fork of a warm supervisor)")
    for method in ("spawn", "forkserver"):
        print(f"    multiprocessing {method:<10} {mp_start(method, samples):6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--workers-per-node", type=int, default=4)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--rtt-samples", type=int, default=3000)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-compare", action="store_true")
    args = parser.parse_args()
    print(f"simcluster {simcluster.__version__}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")
    if not args.skip_scale:
        scale(args.nodes, args.workers_per_node, args.messages)
    round_trips(args.rtt_samples)
    if not args.skip_compare:
        start_times(30)


if __name__ == "__main__":
    main()
