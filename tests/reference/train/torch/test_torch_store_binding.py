"""Rank 0's c10d rendezvous store listens on the master address only, not on every
interface of its host (reference/train/torch/_config.py, `rendezvous_store`)."""

from __future__ import annotations

import pytest
from torch_rank_pool import make_slots

from reference.train.torch import TorchConfig
from reference.train.torch._config import TorchBackend

pytestmark = pytest.mark.slow


def _store_listeners() -> dict:
    """On a rank: the group store's port and every listening socket on it, from /proc."""
    import os

    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    while hasattr(store, "underlying_store"):
        store = store.underlying_store
    port = store.port
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.append((os.path.basename(table), address))
    return {"port": port, "listening": found, "master": os.environ.get("MASTER_ADDR")}


@pytest.mark.parametrize("init_method", ["env", "tcp"])
def test_rank_0s_store_listens_on_the_master_address_only(rank_pool, init_method):
    config = TorchConfig(backend="gloo", init_method=init_method, timeout_s=30)
    backend = TorchBackend()
    with rank_pool.group(config, make_slots(2)) as group:
        backend.on_start(group, config)
        seen = group.execute_single(0, _store_listeners)
        backend.on_shutdown(group, config)
    # 127.0.0.1 in /proc/net/tcp's little-endian hex; nothing on 0.0.0.0 or [::].
    assert seen["listening"] == [("tcp", "0100007F")], seen


def test_the_master_port_is_held_listening_from_the_moment_it_is_chosen(monkeypatch):
    """No other process can take the port before rank 0's store exists, and a rank that
    connects early waits in the backlog instead of being refused (and backing off)."""
    import errno
    import socket

    from reference.train.torch import _config

    monkeypatch.setattr(_config, "address_and_port", lambda: ("127.0.0.1", _free_port()))
    addr, port = _config.reserve_master()
    try:
        with socket.socket() as other, pytest.raises(OSError) as info:
            other.bind((addr, port))
        assert info.value.errno == errno.EADDRINUSE
        with socket.create_connection((addr, port), timeout=5):
            pass  # accepted into the backlog: not refused
    finally:
        for sock in _config._reserved.values():
            sock.close()
        _config._reserved.clear()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
