"""Node-side code: what runs in the processes of a simulated node, never in the driver.

Processes: the node factory (`factory_process.py`, one warm interpreter per cluster, forks a
supervisor per node), each node's supervisor (`supervisor.py`, forks a child per worker and
reports their exits over its driver socket), and each worker (`worker_process.py`: connects
its own socket, runs the user's function, sends the outcome; `worker_channel.py`: its end of
the channel, what `simcluster.worker` re-exports).

Rules. These processes fork, so the factory and supervisors stay single-threaded. This
package imports only simcluster's top-level shared modules (`_wire`, `_proc`, `_errors`,
`procfs`), never driver-side code (`driver`, `frontend`, `faults`, `providers`, `cli`): an
import-linter contract in pyproject.toml enforces it.

Interface. `factory_process.main()` (the factory's entry point, started by
`driver.factory_client`), `supervisor.run_node(boot)` (a node's main loop, also the entry
point of a docker node), `worker_process.current()/channel()/preemption()/before_upload()/
check_faults()` and `worker_channel.WorkerChannel` (public through `simcluster.worker`).
"""
