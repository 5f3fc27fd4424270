"""A training function that records what the torch integration gives a worker."""

from __future__ import annotations

import importlib
import os

from conformance.probe import Journal

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR",
       "MASTER_PORT")


def torch_probe(config: dict) -> None:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    train = importlib.import_module(config["train_module"])
    tt = importlib.import_module(config["train_module"] + ".torch")
    ctx = train.get_context()
    obs: dict = {
        "rank": ctx.get_world_rank(), "world": ctx.get_world_size(),
        "local_rank": ctx.get_local_rank(), "local_world": ctx.get_local_world_size(),
        "node_rank": ctx.get_node_rank(), "env": {k: os.environ.get(k) for k in ENV},
        "initialized": dist.is_available() and dist.is_initialized(),
    }
    if obs["initialized"]:
        obs.update(pg_world=dist.get_world_size(), pg_rank=dist.get_rank(),
                   pg_backend=str(dist.get_backend()))
        total = torch.tensor([float(ctx.get_world_rank() + 1)])
        dist.all_reduce(total)
        obs["all_reduce"] = total.item()
    obs["device"] = str(tt.get_device())
    obs["devices"] = [str(d) for d in tt.get_devices()]
    obs["model"] = type(tt.prepare_model(torch.nn.Linear(4, 2))).__name__
    obs["model_none"] = type(tt.prepare_model(torch.nn.Linear(4, 2),
                                              parallel_strategy=None)).__name__
    data = TensorDataset(torch.arange(16, dtype=torch.float32))
    for shuffle in (False, True):
        loader = tt.prepare_data_loader(DataLoader(data, batch_size=4, shuffle=shuffle))
        sampler = loader.sampler
        obs[f"sampler_{shuffle}"] = [type(sampler).__name__,
                                     getattr(sampler, "num_replicas", None),
                                     getattr(sampler, "rank", None),
                                     getattr(sampler, "shuffle", None)]
        obs[f"items_{shuffle}"] = sorted(int(x) for (batch,) in loader for x in batch)
    Journal(config["journal"]).record(ev="torch", **obs)
    train.report({"rank": obs["rank"]})
