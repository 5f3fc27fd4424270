"""What a cluster's owner holds, in the driver or in a connected client process.

    endpoint.Endpoint      the `ClusterLike` methods shared by `Cluster` and `ClusterClient`;
                           WorkerHandle, WorkerExit, Channel, Placement, Bundle
    client.ClusterClient   `simcluster.connect(address)`: the interface over one socket
    start_args             checking and packing a `start_worker` call's arguments

Processes: whichever process uses the cluster (the driver, or any local process of the same
user that connects). Imports: the top-level shared modules only.
"""
