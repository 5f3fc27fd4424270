"""LightGBMConfig and its backend: LightGBM's network parameters for every worker.

`on_training_start` (driver) asks every worker for its node address (see
`address_and_port`) and a port free on its host, then gives each rank ``num_machines`` (the group's size), ``local_listen_port`` (its
own port) and ``machines`` ("addr:port" of every rank, in rank order). The training function
merges `get_network_params()` into the params it passes ``lightgbm.train``; LightGBM then
connects the workers itself. The port is chosen before LightGBM binds it, so another process
could take it in between (Ray has the same window); a retried group picks new ones.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
from typing import Any

import reference
from reference.train.backend import Backend, BackendConfig

logger = logging.getLogger(__name__)

_network_params: dict | None = None
_network_params_lock = threading.Lock()


def get_network_params() -> dict[str, Any]:
    """This worker's LightGBM network parameters ({} with a warning outside a
    LightGBMTrainer's workers)."""
    with _network_params_lock:
        if not _network_params:
            logger.warning(
                "`reference.train.lightgbm.get_network_params` was called outside the "
                "context of a `reference.train.lightgbm.LightGBMTrainer`. The current process "
                "has no knowledge of the distributed training worker group, so this method "
                "will return an empty dict. Please call this within the training loop of a "
                "`reference.train.lightgbm.LightGBMTrainer`.")
            return {}
        return dict(_network_params)


def _set_network_params(num_machines: int, local_listen_port: int, machines: str) -> None:
    global _network_params
    with _network_params_lock:
        assert _network_params is None, "LightGBM network params are already initialized."
        _network_params = {"num_machines": num_machines,
                           "local_listen_port": local_listen_port, "machines": machines}


def address_and_port() -> tuple[str, int]:
    """This worker's address as LightGBM must see it, and a port free on its host.

    LightGBM finds its own entry of `machines` by matching the addresses of the host's
    network interfaces. Simulated nodes that share the host's loopback have addresses
    (127.0.0.2, ...) that no interface lists, so their workers give 127.0.0.1: their ports
    tell them apart. Nodes with addresses of their own (network namespaces, containers,
    hosts) give their address."""
    from reference.util import get_node_ip_address

    address = get_node_ip_address()
    if address.startswith("127."):
        address = "127.0.0.1"
    with socket.socket() as sock:
        sock.bind(("", 0))
        return address, sock.getsockname()[1]


def _host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


@dataclasses.dataclass
class LightGBMConfig(BackendConfig):
    """LightGBM's distributed setup (no options: the network parameters are computed)."""

    @property
    def backend_cls(self):
        return LightGBMBackend

    def to_dict(self) -> dict[str, Any]:
        return {}


class LightGBMBackend(Backend):
    preload_modules = ("lightgbm", "reference.train.lightgbm")

    def on_training_start(self, worker_group, backend_config: LightGBMConfig) -> None:
        addresses = worker_group.execute(address_and_port)
        machines = ",".join(_host_port(a, p) for a, p in addresses)
        n = len(worker_group)
        reference.get([worker_group.execute_single_async(rank, _set_network_params, n,
                                                         addresses[rank][1], machines)
                       for rank in range(n)])
