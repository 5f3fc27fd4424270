"""trainspec's reference implementation of the Ray Train API (`reference.train`, ...).

`reference.init()`, `shutdown()` and `is_initialized()` mirror `ray.init` and friends:
they start (or connect to) the simulated cluster that `fit()` runs workers on. `get` waits
for the futures a backend's `worker_group.execute_async` returns, as `ray.get` does;
`reference.exceptions` holds the errors it raises.
`PRELOAD` names the modules a cluster's node supervisors should import once, so that every
forked worker starts with the worker runtime loaded. `init(address=...)` asks a running
cluster's nodes to import them (simcluster's `preload` request), so a cluster you build
yourself needs nothing; `simcluster.Cluster(preload=reference.PRELOAD)` does it at the
cluster's start instead, which saves that one-time wait.
"""

from reference._futures import get
from reference._runtime import PRELOAD, init, is_initialized, shutdown

__version__ = "0.1.0"
__all__ = ["PRELOAD", "get", "init", "is_initialized", "shutdown", "__version__"]
