"""Which Lightning package the integration binds to.

``lightning.pytorch`` when it can be imported, else ``pytorch_lightning``: with both
installed, the strategies and callbacks are ``lightning.pytorch`` classes, and a
``pytorch_lightning.Trainer`` rejects them (its strategy check wants its own ``Strategy``
class). The cluster environment base is looked up the same way, on its own.
"""

from __future__ import annotations


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


# Lightning 2.1 or later (2.0 saved broken FSDP checkpoints; 1.x named the strategy
# DDPFullyShardedStrategy); the project's `lightning` extra asks for 2.4 or later.
pl = import_lightning()
