"""The checks that need a real GPU, as one script for a GPU machine.

    python ci/gpu_check.py [--out report.json]

Each check runs in its own process with a deadline and is skipped, with the reason, where
what it needs is missing (no CUDA device, no jax CUDA plugin, no deepspeed or lightning). On
a machine without GPUs every check skips and the script exits 0; a check that runs and fails
makes it exit 1.

- torch: a one-worker TorchTrainer with use_gpu=True sees cuda:0 through get_device(),
  runs a matmul there, and its batches from iter_torch_batches(device="auto") land on it;
- torch_fractional: a two-worker TorchTrainer with resources_per_worker={"GPU": 0.5} puts
  both workers on the one GPU (cuda:0), each computes there, and a gloo all_reduce of
  their results joins them (NCCL refuses two ranks on one device);
- deepspeed: Ray's DeepSpeed guide with a one-worker TorchTrainer (use_gpu=True): the
  training function's `deepspeed.initialize` (ZeRO stage 2, bf16, a torch Adam) joins the
  nccl group, trains on cuda:0, and `save_checkpoint` writes a folder that `load_checkpoint`
  reads back in a second fit of the same run (which goes on from the step saved). The CPU
  run of the guide, two workers and a killed one, is tests/reference/train/torch/test_deepspeed.py;
- lightning_deepspeed: a Lightning Trainer with RayDeepSpeedStrategy(stage=2) and
  RayLightningEnvironment inside a one-worker GPU TorchTrainer fits a tiny module on
  cuda:0 (Lightning's DeepSpeedStrategy refuses any accelerator but CUDA);
- jax: a one-worker JaxTrainer with use_gpu=True (JaxConfig follows the ScalingConfig)
  initialises jax.distributed on the CUDA platform: process_count 1, a cuda device,
  CUDA_VISIBLE_DEVICES as the worker group set it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TORCH = """
import torch, reference.data as rd, reference.train as train
from reference.train.torch import TorchTrainer, get_device
def fn():
    device = get_device()
    x = torch.ones(256, 256, device=device)
    batch = next(iter(rd.range(8).iter_torch_batches(batch_size=8)))
    return {"device": str(device), "sum": float((x @ x).sum()), "batch": str(batch["id"].device)}
r = TorchTrainer(fn, scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True),
                 run_config=train.RunConfig(storage_path=sys.argv[1])).fit()
v = r.return_value
assert v["device"] == "cuda:0" and v["batch"] == "cuda:0" and v["sum"] == 256.0 ** 3, v
print(json.dumps(v))
"""

TORCH_FRACTIONAL = """
import torch, torch.distributed as dist, reference.train as train
from reference.train.torch import TorchConfig, TorchTrainer, get_device
def fn():
    device = get_device()
    x = torch.full((64, 64), float(train.get_context().get_world_rank() + 1), device=device)
    total = (x @ x).sum().cpu()
    dist.all_reduce(total)
    return {"device": str(device), "total": float(total), "backend": dist.get_backend()}
scaling = train.ScalingConfig(num_workers=2, use_gpu=True, resources_per_worker={"GPU": 0.5})
r = TorchTrainer(fn, scaling_config=scaling, torch_config=TorchConfig(backend="gloo"),
                 run_config=train.RunConfig(storage_path=sys.argv[1])).fit()
v = r.return_value
assert v["device"] == "cuda:0" and v["total"] == 64.0 ** 3 * (1 + 4), v
print(json.dumps(v))
"""


DEEPSPEED = """
import tempfile, torch, deepspeed, reference.train as train
from reference.train.torch import TorchTrainer, get_device
def fn(config):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.Adam(model.parameters(), lr=1e-2),
        config={"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
                "zero_optimization": {"stage": 2}})
    start, ckpt = 0, train.get_checkpoint()
    if ckpt:
        with ckpt.as_directory() as d:
            start = engine.load_checkpoint(d)[1]["step"] + 1
    device = get_device()
    for step in range(start, start + 3):
        x = torch.randn(4, 8, device=device, dtype=torch.bfloat16)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
        with tempfile.TemporaryDirectory() as d:
            engine.save_checkpoint(d, client_state={"step": step})
            train.report({"step": step, "loss": loss.item()},
                         checkpoint=train.Checkpoint.from_directory(d))
    return {"device": str(next(engine.module.parameters()).device), "start": start,
            "backend": torch.distributed.get_backend(), "stage": engine.zero_optimization_stage()}
def fit():  # the same run name: the second fit resumes from the first's last checkpoint
    return TorchTrainer(fn, train_loop_config={},
                        scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True),
                        run_config=train.RunConfig(storage_path=sys.argv[1], name="ds")).fit()
first = fit()
second = fit()
v = {"first": first.return_value, "second": second.return_value}
assert v["first"] == {"device": "cuda:0", "start": 0, "backend": "nccl", "stage": 2}, v
assert v["second"]["start"] == 3 and second.metrics["step"] == 5, v
print(json.dumps(v))
"""

LIGHTNING_DEEPSPEED = """
import torch, lightning.pytorch as pl, reference.train as train
from torch.utils.data import DataLoader, TensorDataset
from reference.train.torch import TorchTrainer
from reference.train.lightning import (RayDeepSpeedStrategy, RayLightningEnvironment,
                                       prepare_trainer)
class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
    def training_step(self, batch, batch_idx):
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)
def fn():
    data = TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
    strategy = RayDeepSpeedStrategy(stage=2)
    trainer = prepare_trainer(pl.Trainer(
        max_epochs=1, devices="auto", accelerator="auto", strategy=strategy,
        plugins=[RayLightningEnvironment()], enable_progress_bar=False, logger=False,
        enable_checkpointing=False, enable_model_summary=False))
    model = Tiny()
    trainer.fit(model, train_dataloaders=DataLoader(data, batch_size=4))
    return {"root_device": str(strategy.root_device), "steps": trainer.global_step,
            "param_device": str(next(model.parameters()).device)}
r = TorchTrainer(fn, scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True),
                 run_config=train.RunConfig(storage_path=sys.argv[1])).fit()
v = r.return_value
assert v == {"root_device": "cuda:0", "steps": 8, "param_device": "cuda:0"}, v
print(json.dumps(v))
"""

JAX = """
import os, reference.train as train
from reference.train.v2.jax import JaxTrainer
def fn():
    import jax
    return {"platform": jax.devices()[0].platform, "processes": jax.process_count(),
            "initialized": jax.distributed.is_initialized(),
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
r = JaxTrainer(fn, scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True),
               run_config=train.RunConfig(storage_path=sys.argv[1])).fit()
v = r.return_value
assert v["platform"] == "gpu" or v["platform"] == "cuda", v
assert v["processes"] == 1 and v["initialized"], v
print(json.dumps(v))
"""


# What the machine has, probed once in a child process (this one never imports torch):
# whether torch imports and sees a CUDA device, which of deepspeed and lightning are
# installed, and whether a jax CUDA plugin is.
PROBE = """
import importlib.metadata as m, importlib.util, json
try:
    import torch
    cuda = torch.cuda.is_available()
except ImportError as exc:
    torch, cuda = repr(exc), False
print(json.dumps({
    "torch": torch if isinstance(torch, str) else None, "cuda": cuda,
    "found": [n for n in ("deepspeed", "lightning") if importlib.util.find_spec(n)],
    "jax_cuda": any((d.metadata["Name"] or "").lower().startswith(("jax-cuda", "jax_cuda"))
                    for d in m.distributions())}))
"""
NEEDS = {"torch": (), "torch_fractional": (), "deepspeed": ("deepspeed",),
         "lightning_deepspeed": ("deepspeed", "lightning"), "jax": ()}


def probe_machine() -> dict:
    """What PROBE prints (a failed probe: every check skips, saying why)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        return {"failed": done.stderr[-300:]}
    return json.loads(done.stdout.splitlines()[-1])


def _skip_reason(name: str, machine: dict) -> str | None:
    if "failed" in machine:
        return f"the machine probe failed: {machine['failed']}"
    if name == "jax":
        return None if machine["jax_cuda"] else "no jax CUDA plugin installed"
    if machine["torch"] is not None:
        return f"{name} is not importable: {machine['torch']}"
    if not machine["cuda"]:
        return "no CUDA device visible to torch"
    if not set(NEEDS[name]) <= set(machine["found"]):
        return "deepspeed or lightning is not installed (the deepspeed and lightning extras)"
    return None


def run_check(name: str, body: str, timeout_s: float, machine: dict) -> dict:
    reason = _skip_reason(name, machine)
    if reason is not None:
        return {"check": name, "status": "skipped", "reason": reason}
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as storage:
        try:
            done = subprocess.run([sys.executable, "-c", "import json, sys\n" + body, storage],
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"check": name, "status": "failed", "reason": f"timed out ({timeout_s} s)"}
    out = {"check": name, "seconds": round(time.monotonic() - start, 2)}
    if done.returncode == 0:
        return {**out, "status": "passed", "seen": json.loads(done.stdout.splitlines()[-1])}
    return {**out, "status": "failed", "reason": done.stderr[-2000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                      "gpu_check.json"))
    parser.add_argument("--timeout", type=float, default=240.0)
    args = parser.parse_args()
    checks = {"torch": TORCH, "torch_fractional": TORCH_FRACTIONAL, "deepspeed": DEEPSPEED, "lightning_deepspeed": LIGHTNING_DEEPSPEED,
              "jax": JAX}
    machine = probe_machine()
    results = [run_check(name, body, args.timeout, machine) for name, body in checks.items()]
    for r in results:
        print(f"{r['check']:19} {r['status']:8} {r.get('reason') or r.get('seen')}")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    return 1 if any(r["status"] == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
