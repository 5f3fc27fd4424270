"""trainspec's reference implementation of the Ray Train API (`reference.train`, ...).

`reference.init()`, `shutdown()` and `is_initialized()` mirror `ray.init` and friends:
they start (or connect to) the simulated cluster that `fit()` runs workers on.
"""

from reference._runtime import init, is_initialized, shutdown

__version__ = "0.1.0"
__all__ = ["init", "is_initialized", "shutdown", "__version__"]
