"""HorovodConfig: Ray's fields and defaults, kept so code that builds one still runs.

Nothing here starts Horovod: under Train V2 the only trainer that took this config refuses
to be built (`HorovodTrainer`), and the reference has no V1 to fall back to. The backend
fails at its first hook, should someone pass the config to a `DataParallelTrainer`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from reference.train.backend import Backend, BackendConfig


@dataclasses.dataclass
class HorovodConfig(BackendConfig):
    """Ray's ``HorovodConfig`` fields: network interfaces, log verbosity, the workers'
    shared secret (`key`, made by Horovod when None), ssh settings, the Gloo rendezvous
    timeout and the (unused) placement group timeout."""

    nics: Optional[set] = None
    verbose: int = 1
    key: Optional[str] = None
    ssh_port: Optional[int] = None
    ssh_identity_file: Optional[str] = None
    ssh_str: Optional[str] = None
    timeout_s: int = 300
    placement_group_timeout_s: int = 100

    def __post_init__(self):
        # As Ray: the private key's text is written to the identity file once, owner-only.
        if self.ssh_str and not os.path.exists(self.ssh_identity_file):
            with open(self.ssh_identity_file, "w") as f:
                os.chmod(self.ssh_identity_file, 0o600)
                f.write(self.ssh_str)
        if self.key is None:
            # Horovod's own key format: its runner is what would read the key.
            from horovod.runner.common.util import secret

            self.key = secret.make_secret_key()

    @property
    def backend_cls(self) -> type[Backend]:
        return _HorovodBackend


class _HorovodBackend(Backend):
    share_cuda_visible_devices = True

    def on_start(self, worker_group, backend_config: BackendConfig) -> None:
        raise NotImplementedError(
            "The reference does not run Horovod (Ray 2.60's Train V2 does not either): "
            "train with `TorchTrainer` or `TensorflowTrainer` instead.")
