"""The checks that need a real GPU, as one script for a GPU machine.

    python ci/gpu_check.py [--out report.json]

Each check runs in its own process with a deadline and is skipped, with the reason, where
what it needs is missing (no CUDA device, no jax CUDA plugin). On a machine without GPUs
every check skips and the script exits 0; a check that runs and fails makes it exit 1.

- torch: a one-worker TorchTrainer with use_gpu=True sees cuda:0 through get_device(),
  runs a matmul there, and its batches from iter_torch_batches(device="auto") land on it;
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


def _skip_reason(name: str) -> str | None:
    probe = {"torch": "import torch; raise SystemExit(0 if torch.cuda.is_available() else 3)",
             "jax": "import importlib.metadata as m; raise SystemExit(0 if any("
                    "(d.metadata['Name'] or '').lower().startswith(('jax-cuda', 'jax_cuda'))"
                    " for d in m.distributions()) else 3)"}[name]
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120)
    if done.returncode == 0:
        return None
    return {"torch": "no CUDA device visible to torch",
            "jax": "no jax CUDA plugin installed"}.get(name) if done.returncode == 3 else \
        f"{name} is not importable: {done.stderr.decode()[-300:]}"


def run_check(name: str, body: str, timeout_s: float) -> dict:
    reason = _skip_reason(name)
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
    results = [run_check("torch", TORCH, args.timeout), run_check("jax", JAX, args.timeout)]
    for r in results:
        print(f"{r['check']:6} {r['status']:8} {r.get('reason') or r.get('seen')}")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    return 1 if any(r["status"] == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
