"""Which Lightning package the integration binds to.

``lightning.pytorch`` when it can be imported, else ``pytorch_lightning``: with both
installed, the strategies and callbacks are ``lightning.pytorch`` classes, and a
``pytorch_lightning.Trainer`` rejects them (its strategy check wants its own ``Strategy``
class). The cluster environment base is looked up the same way, on its own.
"""

from __future__ import annotations

from packaging.version import Version


def import_lightning():
    """The Lightning module playing ``pl``: ``lightning.pytorch``, else ``pytorch_lightning``."""
    try:
        import lightning.pytorch as pl
    except ModuleNotFoundError:
        import pytorch_lightning as pl
    return pl


def lightning_environment_base() -> type:
    try:
        from lightning.pytorch.plugins.environments import LightningEnvironment
    except ModuleNotFoundError:
        from pytorch_lightning.plugins.environments import LightningEnvironment
    return LightningEnvironment


pl = import_lightning()
LIGHTNING_2_0 = Version(pl.__version__) >= Version("2.0.0")
LIGHTNING_BEFORE_2_1 = Version(pl.__version__) < Version("2.1.0")

# Lightning 2.0 renamed the fully sharded strategy.
FSDPStrategy = pl.strategies.FSDPStrategy if LIGHTNING_2_0 else pl.strategies.DDPFullyShardedStrategy
