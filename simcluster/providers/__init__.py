"""Providers: where a node's processes run and what network they see (`base.py` has the
interface: open, node_address, prepare, spawn, set_cut, close).

    base.Provider          `process` (default): supervisors on this machine, 127.0.0.x each
    base.RecordingProvider the fake for tests: partitions recorded, not enforced
    netns.NetnsProvider    a network namespace per node on a bridge; partitions
    docker.DockerProvider  a container per node (Docker SDK)

Processes: the driver (prepare in the caller's thread, spawn on the loop thread); the
netns reaper and a docker node's entry point run as their own processes
(`python -m simcluster.providers.netns|docker`). Imports: the top-level shared modules, and
`node.supervisor` for a container's node.
"""
