"""The matrix's `torch-ddp` job: a tiny DDP model under the implementation's TorchTrainer.

`train_ddp` takes the same `{"script": conformance.probe.Script}` config as the probe's
`run_script` and writes the same journal (start / report / reported / fault / end events,
one shard file per rank in every checkpoint), so the history checkers and the matrix's
expectations read its runs exactly as they read the probe's. On top it trains a
`torch.nn.Linear` wrapped in DistributedDataParallel (the trainer sets up gloo on the
CPU), keeps the model's weights in rank 0's checkpoint folder and loads them on restore.

Unlike the probe, no fault needs to wait for the attempt's peers to start: the DDP
constructor is a collective, so every rank has journaled its start before any rank can
reach a report.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import time
from typing import Any

from conformance.probe import (
    begin,
    fire_due_faults,
    read_state,
    record_start,
    write_checkpoint,
)

FEATURES = 8
BATCH = 16


@dataclasses.dataclass(frozen=True)
class DDPTrainer:
    """Stands in for the trainer class in `conformance.scenarios.run`: builds the
    implementation's TorchTrainer with `train_ddp` as the training function (picklable, so
    it can travel to wherever the implementation's driver calls it)."""

    torch_trainer: Any

    def __call__(self, **kwargs):
        kwargs["train_loop_per_worker"] = train_ddp
        return self.torch_trainer(**kwargs)


def _model(torch, checkpoint):
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            path = os.path.join(d, "model.pt")
            if os.path.exists(path):
                model.load_state_dict(torch.load(path, weights_only=True))
    return model


def train_ddp(config: dict) -> dict:
    import torch
    import torch.distributed as dist

    s, train, ctx, rank, world, journal, attempt = begin(config)
    stack_file = open(os.path.join(s.journal_dir, f"stacks-rank{rank}-a{attempt}.txt"), "w")
    faulthandler.dump_traceback_later(s.stack_dump_after_s, exit=False, file=stack_file)
    try:
        checkpoint = train.get_checkpoint()
        restored = read_state(train, checkpoint)
        model = _model(torch, checkpoint)
        record_start(s, ctx, journal, attempt, restored)
        if not dist.is_initialized():
            raise RuntimeError(f"rank {rank} of {world}: the TorchTrainer did not set up "
                               "torch.distributed before the training function ran")
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        data = torch.Generator().manual_seed(1000 + rank)
        first = 0 if restored is None or restored["step"] is None else restored["step"] + 1
        steps_at_this_size = 0
        for index, step in enumerate(range(first, s.steps)):
            if s.step_sleep_s:
                time.sleep(s.step_sleep_s)
            fire_due_faults(s, journal, rank, world, attempt, index, step)
            x = torch.randn(BATCH, FEATURES, generator=data)
            loss = torch.nn.functional.mse_loss(ddp(x), x.sum(dim=1, keepdim=True))
            optimizer.zero_grad()
            loss.backward()  # the gradient all-reduce: every rank takes part
            optimizer.step()
            folder = os.path.join(s.journal_dir, "local", f"a{attempt}-r{rank}-s{step}")
            saved = write_checkpoint(train, folder, step, rank, attempt)
            if rank == 0:
                torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
            journal.record(ev="report", rank=rank, attempt=attempt, step=step,
                           checkpoint=True, world_size=world)
            train.report({"step": step, "rank": rank, "attempt": attempt, "loss": loss.item()},
                         checkpoint=saved,
                         checkpoint_dir_name=f"ckpt-{step:04d}" if rank == 0 else f"r{rank}-x")
            after = train.get_checkpoint()
            journal.record(ev="reported", rank=rank, attempt=attempt, step=step,
                           checkpoint_path=None if after is None else after.path)
            steps_at_this_size += 1
            if s.stop_at_world_size is not None and world >= s.stop_at_world_size \
                    and steps_at_this_size >= 2:
                break
        journal.record(ev="end", rank=rank, attempt=attempt)
        return {"rank": rank, "attempt": attempt, "world_size": world}
    finally:
        faulthandler.cancel_dump_traceback_later()
        stack_file.close()
