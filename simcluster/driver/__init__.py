"""Driver-side code: the cluster's core, run by the process that owns a `Cluster`.

Processes: the driver only; `loop.Loop` is its one event-loop thread (every socket), the
rest runs in the caller's threads under `Driver.lock`.

    cluster.Cluster            the public object (an `Endpoint`): checks arguments, owns a Driver
    driver.Driver              nodes, workers, the resource ledger, the history, the loop;
      node_ops.NodeOps           its node half (start through the factory, faults, down)
      worker_ops.WorkerOps       its worker half (start, messages, signals, final exits)
    factory_client.NodeFactory the driver's end of the node factory (`node.factory_process`)
    loop.Loop                  the event loop: connections, framing, handshakes, timers
    rpc.ClientSession          what a `simcluster.connect()` client asks, served here
    resources.ResourceBook     who holds which resources (pure bookkeeping)
    placement                  bundle placement strategies (pure, Hypothesis-tested)
    accelerators               a worker's visible-device variables for its bundle

Imports: the top-level shared modules, `frontend` (handles), `faults` (plans) and
`providers`; never `cli`.
"""
