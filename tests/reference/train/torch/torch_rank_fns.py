"""Functions the rank processes of the torch tests run (importable, so they pickle by
reference), and the single-process computation the DDP ranks are compared with."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 3
ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR",
       "MASTER_PORT", "ACCELERATE_TORCH_DEVICE", "CUDA_VISIBLE_DEVICES")


def inspect_rank() -> dict:
    """What a worker sees once the backend set it up."""
    from reference.train.torch import get_devices

    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    return {"env": {k: os.environ.get(k) for k in ENV}, "backend": dist.get_backend(),
            "rank": dist.get_rank(), "world_size": dist.get_world_size(),
            "sum": total.item(), "devices": [str(d) for d in get_devices()]}


def group_exists() -> bool:
    return dist.is_initialized()


def wrapped_model_type() -> str:
    from reference.train.torch import prepare_model

    return type(prepare_model(torch.nn.Linear(2, 1))).__name__


def sampler_indices(n: int, batch_size: int, shuffle: bool, epochs: int) -> list:
    """Per epoch, the sample indices this rank was given by a prepared loader."""
    from reference.train.torch import prepare_data_loader

    dataset = TensorDataset(torch.arange(n))
    loader = prepare_data_loader(DataLoader(dataset, batch_size=batch_size, shuffle=shuffle))
    seen = []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        seen.append([int(i) for (batch,) in loader for i in batch])
    return seen


# ------------------------------------------------------------------------ DDP equivalence
def make_data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


def make_model(width: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, 1))


def _fit(model, loader, lr: float, epochs: int, set_epoch: bool):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(epochs):
        if set_epoch:
            loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def _weights(model) -> dict:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def ddp_rank(width: int, per_rank_batch: int, lr: float, epochs: int, n: int, seed: int,
             shuffle: bool) -> tuple[str, dict]:
    """One rank of data-parallel training with the prepare_* utilities."""
    from reference.train import get_context
    from reference.train.torch import prepare_data_loader, prepare_model

    model = prepare_model(make_model(width, seed))
    x, y = make_data(n, seed)
    loader = prepare_data_loader(DataLoader(TensorDataset(x, y), batch_size=per_rank_batch,
                                            shuffle=shuffle))
    _fit(model, loader, lr, epochs, set_epoch=get_context().get_world_size() > 1)
    plain = model.module if hasattr(model, "module") else model
    return type(model).__name__, _weights(plain)


def single_process(width: int, global_batch: int, lr: float, epochs: int, n: int, seed: int,
                   shuffle: bool) -> dict:
    """The same training in one process on the full batch. With shuffling, each epoch uses
    the permutation a DistributedSampler draws (torch.randperm seeded with seed 0 + epoch):
    rank r takes every W-th index of it, so step k of all ranks together covers exactly
    positions [k*B, (k+1)*B) of that permutation."""
    model = make_model(width, seed)
    x, y = make_data(n, seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(epochs):
        order = (torch.randperm(n, generator=torch.Generator().manual_seed(epoch))
                 if shuffle else torch.arange(n))
        for start in range(0, n, global_batch):
            idx = order[start:start + global_batch]
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return _weights(model)


def max_abs_error(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


# ----------------------------------------------------------------- local mode under torchrun
def local_mode_fit(with_datasets: bool, experiment: str) -> dict:
    """Run a TorchTrainer in local mode in a process torchrun would have started."""
    from reference.train import ScalingConfig, get_context, report
    from reference.train.torch import TorchTrainer, get_device

    def train_fn():
        ctx = get_context()
        total = torch.tensor([1.0])
        dist.all_reduce(total)
        report({"rank": ctx.get_world_rank()})
        return {"world_size": ctx.get_world_size(), "rank": ctx.get_world_rank(),
                "local_rank": ctx.get_local_rank(),
                "local_world_size": ctx.get_local_world_size(),
                "node_rank": ctx.get_node_rank(), "sum": total.item(),
                "device": str(get_device()), "backend": dist.get_backend(),
                "name": ctx.get_experiment_name()}

    from reference.train import RunConfig

    trainer = TorchTrainer(train_fn, scaling_config=ScalingConfig(num_workers=0),
                           run_config=RunConfig(name=experiment),
                           datasets={"train": [1, 2]} if with_datasets else None)
    try:
        result = trainer.fit()
    except AssertionError as exc:
        return {"error": str(exc), "initialized_after": dist.is_initialized()}
    return {**result.return_value, "metrics": result.metrics,
            "initialized_after": dist.is_initialized()}


def local_mode_with_existing_group() -> str:
    from reference.train import ScalingConfig
    from reference.train.torch import TorchTrainer

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        TorchTrainer(lambda: None, scaling_config=ScalingConfig(num_workers=0)).fit()
    except AssertionError as exc:
        return f"{str(exc)} / still initialized: {dist.is_initialized()}"
    return "no error"


# ----------------------------------------------------------------- TorchTrainer end to end
def fit_loop(config: dict) -> dict:
    """A training function for TorchTrainer: DDP through the prepare utilities, a
    checkpoint every epoch (each rank adds its own weights file to it)."""
    import tempfile

    from reference.train import Checkpoint, get_checkpoint, get_context, report
    from reference.train.torch import prepare_data_loader, prepare_model

    ctx = get_context()
    model = make_model(config["width"], 0)
    start = 0
    checkpoint = get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "model.pt"))
        model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    model = prepare_model(model)
    x, y = make_data(config["n"], 0)
    loader = prepare_data_loader(DataLoader(TensorDataset(x, y),
                                            batch_size=config["per_rank_batch"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(start, config["epochs"]):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with tempfile.TemporaryDirectory() as d:
            weights = _weights(model.module)
            torch.save(weights, os.path.join(d, f"rank{ctx.get_world_rank()}.pt"))
            if ctx.get_world_rank() == 0:
                torch.save({"model": weights, "epoch": epoch}, os.path.join(d, "model.pt"))
            report({"epoch": epoch, "loss": loss.item()},
                   checkpoint=Checkpoint.from_directory(d))
    return type(model).__name__


def describe_worker(out_dir: str) -> None:
    """Each rank writes what it sees to out_dir/rank<r>.json."""
    import json

    from reference.train import get_context
    from reference.train._internal.accelerators import ACCELERATOR_IDS_VAR
    from reference.train.torch import get_devices

    rank = get_context().get_world_rank()
    seen = {"env": {k: os.environ.get(k) for k in ENV},
            "ids": os.environ.get(ACCELERATOR_IDS_VAR), "backend": dist.get_backend(),
            "devices": [str(d) for d in get_devices()],
            "node_rank": get_context().get_node_rank()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
