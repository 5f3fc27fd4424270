"""The training function of the DeepSpeed tests, in the form of Ray's DeepSpeed guide
(importable, so it pickles by reference), and the single-process computation it must match.

Each step, rank r trains on its half of that step's global batch; DeepSpeed averages the
two ranks' gradients and clips their global norm to 1, so the ZeRO run equals plain torch
Adam with the same clipping on the whole global batch.
"""

from __future__ import annotations

import json
import os
import tempfile

import torch

FEATURES = 3
CLIP = 1.0


def make_data(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 1))


def flat(model: torch.nn.Module) -> list:
    return [v for p in model.parameters() for v in p.detach().flatten().tolist()]


def ds_config(config: dict) -> dict:
    return {"train_micro_batch_size_per_gpu": config["batch"],
            "gradient_accumulation_steps": 1,
            # DeepSpeed's default too (GRADIENT_CLIPPING_DEFAULT, 1.0 in 0.19); written out
            # because the single-process computation below must do the same.
            "gradient_clipping": CLIP,
            "zero_optimization": {"stage": config["stage"]},
            "steps_per_print": 10**9}


def _log(config: dict, rank: int, record: dict) -> None:
    with open(os.path.join(config["out"], f"rank{rank}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")


def deepspeed_loop(config: dict):
    """`deepspeed.initialize` on the group the TorchTrainer made, one report with a
    `save_checkpoint` folder per step, resuming from `get_checkpoint()`. With
    config['kill_after'], rank 1 exits after that step's report, once (a marker file)."""
    import deepspeed

    import reference.train as train

    rank = train.get_context().get_world_rank()
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer,
                                                   config=ds_config(config))
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            _, client_state = engine.load_checkpoint(folder)
        start = client_state["step"] + 1
    _log(config, rank, {"start": start, "resumed": checkpoint is not None,
                        "zero_stage": engine.zero_optimization_stage(),
                        "backend": torch.distributed.get_backend()})

    x, y = make_data(config["n"])
    batch = config["batch"]
    for step in range(start, config["steps"]):
        lo = (2 * step + rank) * batch
        loss = torch.nn.functional.mse_loss(engine(x[lo:lo + batch]), y[lo:lo + batch])
        engine.backward(loss)
        engine.step()
        with tempfile.TemporaryDirectory() as folder:
            engine.save_checkpoint(folder, client_state={"step": step})
            train.report({"step": step, "loss": loss.item()},
                         checkpoint=train.Checkpoint.from_directory(folder))
        if rank == 1 and step == config.get("kill_after"):
            marker = os.path.join(config["out"], "killed")
            if not os.path.exists(marker):
                open(marker, "w").write(str(step))
                os._exit(1)
    _log(config, rank, {"weights": flat(engine.module)})


def single_process(config: dict) -> list:
    """Plain torch Adam on each step's whole global batch (both ranks' halves), the
    gradient's norm clipped as DeepSpeed clips it."""
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    x, y = make_data(config["n"])
    size = 2 * config["batch"]
    for step in range(config["steps"]):
        optimizer.zero_grad()
        lo = step * size
        torch.nn.functional.mse_loss(model(x[lo:lo + size]), y[lo:lo + size]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
    return flat(model)
