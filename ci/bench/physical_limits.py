"""Physical limits: what the machine itself needs for the work each benchmark job stands for.

Each function returns {limit key: [samples]}; times are seconds, memory is bytes. They run in
the harness process (which imports nothing heavy), between the jobs of each round, so they
see the same machine load as the jobs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

import proctree

_TIMEOUT_S = 60


def _start_pythons(n: int) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(n)]
    for p in procs:
        p.wait(_TIMEOUT_S)


def python_pair(samples: int = 7) -> dict[str, list[float]]:
    """Two bare interpreters (`python -c pass`) started in parallel, until both exited."""
    out = []
    for _ in range(samples):
        t = time.perf_counter()
        _start_pythons(2)
        out.append(time.perf_counter() - t)
    return {"python_pair_s": out}


def tcp_rtt(samples: int = 2000) -> dict[str, list[float]]:
    """Median of 1-byte ping-pongs with an echo server in another process over loopback TCP."""
    listener = socket.create_server(("127.0.0.1", 0))
    pid = os.fork()
    if pid == 0:  # echo server
        try:
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(64):
                conn.sendall(data)
        finally:
            os._exit(0)
    try:
        conn = socket.create_connection(listener.getsockname(), timeout=_TIMEOUT_S)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        times = []
        for _ in range(samples):
            t = time.perf_counter()
            conn.sendall(b"x")
            conn.recv(64)
            times.append(time.perf_counter() - t)
        conn.close()
    finally:
        listener.close()
        os.waitpid(pid, 0)
    return {"tcp_rtt_s": [statistics.median(times[samples // 10:])]}


def kill_restart(samples: int = 5) -> dict[str, list[float]]:
    """SIGKILL a process, reap it, then start two bare interpreters in parallel (a whole
    group restarted): from the kill until both new interpreters have run and exited."""
    out = []
    for _ in range(samples):
        victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(0.2)
        t = time.perf_counter()
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(_TIMEOUT_S)
        _start_pythons(2)
        out.append(time.perf_counter() - t)
    return {"kill_restart_s": out}


def write_random_file(path: str, size_mb: int) -> None:
    with open(path, "wb") as f:
        for _ in range(size_mb):
            f.write(os.urandom(1 << 20))


def copy_files(workdir: str, size_mb: int, ranks: int = 2,
               samples: int = 3) -> dict[str, list[float]]:
    """`cp -r` of `ranks` files of size_mb (random bytes, in the page cache, as the job's are)
    to another folder of the same file system; and a rename of the same folder (a move)."""
    src = os.path.join(workdir, "limit-src")
    dst = os.path.join(workdir, "limit-dst")
    moved = os.path.join(workdir, "limit-moved")
    os.makedirs(src, exist_ok=True)
    for r in range(ranks):
        write_random_file(os.path.join(src, f"shard_{r}.bin"), size_mb)
    cp, mv = [], []
    try:
        for _ in range(samples):
            shutil.rmtree(dst, ignore_errors=True)
            os.sync()  # no write-back of earlier writes during the timed copy
            t = time.perf_counter()
            subprocess.run(["cp", "-r", src, dst], check=True, timeout=_TIMEOUT_S * 5)
            cp.append(time.perf_counter() - t)
            t = time.perf_counter()
            os.rename(src, moved)
            mv.append(time.perf_counter() - t)
            os.rename(moved, src)
    finally:
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(dst, ignore_errors=True)
    total_mb = ranks * size_mb
    return {"cp_s": cp, "cp_mbps": [total_mb / s for s in cp], "rename_s": mv}


def fork_many(n: int) -> dict[str, list[float]]:
    """Fork n children of this (small) Python process; time until every child has signalled
    it runs, and the RSS sum of this process and the n children while they are all alive."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pids = []
    t = time.perf_counter()
    try:
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(ready_r)
                    os.close(go_w)
                    os.write(ready_w, b"x")
                    os.read(go_r, 1)  # blocks until the parent closes its end
                finally:
                    os._exit(0)
            pids.append(pid)
        os.close(ready_w)
        got = 0
        while got < n:
            chunk = os.read(ready_r, n - got)
            if not chunk:
                break
            got += len(chunk)
        elapsed = time.perf_counter() - t
        rss = proctree.rss_bytes(os.getpid()) + sum(proctree.rss_bytes(p) for p in pids)
    finally:
        os.close(go_w)
        os.close(go_r)
        os.close(ready_r)
        for pid in pids:
            os.waitpid(pid, 0)
    return {"fork_many_s": [elapsed], "fork_many_rss": [float(rss)]}
