"""Addresses the backends hand out: a worker's node address and a free port on its host."""

from __future__ import annotations

import socket


def address_and_port() -> tuple[str, int]:
    """This worker's node address and a port free on every address of its host (a
    coordinator or rendezvous store listens on all of them, and simulated nodes share one
    host whose other addresses hold ports of their own). Another process may take the port
    before it is bound, as in Ray; a retried group picks anew."""
    from simcluster import worker

    try:
        address = worker.current().node_address
    except RuntimeError:  # not a cluster's worker (a test harness): this host's loopback
        address = "127.0.0.1"
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return address, sock.getsockname()[1]


def host_port(address: str, port: int) -> str:
    """`address:port`, an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
