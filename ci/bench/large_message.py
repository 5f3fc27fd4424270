"""simcluster benchmark (not a test): one large message, and everyone else meanwhile.

    python ci/bench/large_message.py [--mib 64] [--others 3] [--via-client]

A worker sends one message of `--mib` MiB to the driver while `--others` workers each send
a small timestamped message every millisecond. Prints the large message's latency end to
end (from the worker's `send` to the driver's `recv` returning it, pickling included) and
the other workers' median and p99 one-way latency while it was on its way, beside their
median before it. `--via-client` runs the driver side as a `simcluster.connect()` client,
so the message crosses the driver's loop and the client's reader. Timestamps are
`time.monotonic()`, one clock for every process of the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import simcluster  # noqa: E402
from simcluster import Cluster, NodeSpec, worker  # noqa: E402


def big_sender(mib: int):
    ch = worker.channel()
    ch.recv()  # go
    payload = bytes(mib << 20)
    ch.send(("big", time.monotonic(), payload))
    ch.recv()  # stay until it arrived: an exit ends the channel at most 0.5 s later


def ticker():
    """Send ("tick", sent_at) every millisecond until told to stop."""
    ch = worker.channel()
    stop = threading.Event()
    threading.Thread(target=lambda: (ch.recv(), stop.set()), daemon=True).start()
    while not stop.wait(0.001):
        ch.send(("tick", time.monotonic()))


def measure(endpoint, node_id: str, mib: int, others: int) -> dict:
    arrivals: list[tuple[float, float]] = []   # (arrived, latency) of every tick
    lock = threading.Lock()
    big = endpoint.start_worker(node_id, big_sender, (mib,))
    tickers = [endpoint.start_worker(node_id, ticker) for _ in range(others)]
    channels = {w.id: endpoint.channel(w.id) for w in tickers}
    stop = threading.Event()

    def drain(ch):
        while not stop.is_set():
            try:
                _, sent = ch.recv(timeout=0.2)
            except TimeoutError:
                continue
            except simcluster.ChannelClosed:
                return
            now = time.monotonic()
            with lock:
                arrivals.append((now, now - sent))

    readers = [threading.Thread(target=drain, args=(ch,), daemon=True)
               for ch in channels.values()]
    for t in readers:
        t.start()
    time.sleep(1.0)  # the others' latency before
    big_ch = endpoint.channel(big.id)
    start = time.monotonic()
    big_ch.send("go")
    tag, sent, payload = big_ch.recv(timeout=120)
    arrived = time.monotonic()
    assert tag == "big" and len(payload) == mib << 20
    big_ch.send("done")
    time.sleep(0.2)
    stop.set()
    for w in tickers:
        endpoint.send(w.id, "stop")
    for t in readers:
        t.join(5)
    for w in [big, *tickers]:
        w.wait(30)
    with lock:
        before = [lat for at, lat in arrivals if at < start]
        during = [lat for at, lat in arrivals if start <= at <= arrived]
    return {"big": arrived - sent, "before": before, "during": during}


def ms(values: list[float], q: float = 0.5) -> str:
    if not values:
        return "    n/a"
    if q == 0.5:
        return f"{statistics.median(values) * 1e3:7.2f}"
    return f"{sorted(values)[min(len(values) - 1, int(len(values) * q))] * 1e3:7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--others", type=int, default=3)
    parser.add_argument("--via-client", action="store_true")
    args = parser.parse_args()
    with Cluster(nodes=[NodeSpec(cpus=args.others + 1)]) as cluster:
        node_id = cluster.nodes[0].id
        if args.via_client:
            with simcluster.connect(cluster.address) as client:
                got = measure(client, node_id, args.mib, args.others)
        else:
            got = measure(cluster, node_id, args.mib, args.others)
    path = "worker -> driver -> connect() client" if args.via_client else "worker -> driver"
    print(f"{args.mib} MiB message, {path}: {got['big']:.3f} s end to end")
    print(f"others ({args.others} workers, a message each per ms), one-way latency in ms:")
    print(f"    before   median {ms(got['before'])}   p99 {ms(got['before'], 0.99)}"
          f"   ({len(got['before'])} messages)")
    print(f"    during   median {ms(got['during'])}   p99 {ms(got['during'], 0.99)}"
          f"   ({len(got['during'])} messages)")


if __name__ == "__main__":
    main()
