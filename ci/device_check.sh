#!/usr/bin/env bash
# The checks that need a real GPU, as one prepared run for a machine that has one:
#
#   ci/device_check.sh [OUT_DIR]        (default: $OUT, else reports/device)
#
# It runs from a plain checkout with the machine's own Python and torch (no install, no
# network: the repository goes on PYTHONPATH), in under 5 minutes on one GPU:
#   1. what the machine has (nvidia-smi, torch, jax) -> machine.txt;
#   2. the conformance suite's accelerator clauses against the reference on the real GPU
#      (GPU ids and sharing, fractional GPUs, get_device(s), prepare_model /
#      prepare_data_loader on cuda:0, TorchTrainer's NCCL group on one worker, accelerator
#      type, TPU chips simulated) -> reference.json / reference.md, each clause saying
#      whether it ran on real or simulated hardware;
#   3. ci/gpu_check.py: TorchTrainer(use_gpu=True) on cuda:0, two fractional workers on one
#      GPU, DeepSpeed and Lightning+DeepSpeed where installed, JaxTrainer on CUDA where jax's
#      CUDA build is installed -> gpu_check.json.
# Without a GPU it still runs: the clauses run on simulated GPUs and gpu_check skips, so the
# reports say so. Exit status: 0 when nothing failed, else 1 (the reports tell which part).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-reports/device}}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=${RAY_TRAIN_HEALTH_CHECK_INTERVAL_S:-0.1}
start=$(date +%s)

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  else
    echo "nvidia-smi: not found"
  fi
  "$py" - <<'EOF'
import platform
print("python", platform.python_version())
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "devices", torch.cuda.device_count() if torch.cuda.is_available() else 0,
          "nccl", torch.distributed.is_nccl_available())
except ImportError:
    print("torch: not installed")
try:
    import jax
    print("jax", jax.__version__, "backend", jax.default_backend())
except Exception as exc:  # jax absent, or no plugin for its platform
    print("jax:", type(exc).__name__, exc)
EOF
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

# The suite's pytest plugin is registered by `pip install`; from a plain checkout name it.
plugin=()
"$py" -c "import importlib.metadata as m, sys; sys.exit(0 if any(e.value == 'conformance.plugin'
    for e in m.entry_points(group='pytest11')) else 1)" || plugin=(-p conformance.plugin)

status=0
echo "=== accelerator clauses against the reference"
# one process: the clauses are one file, and a second process would only start its own nodes
timeout 240 "$py" -m conformance run --impl reference --workers 1 --out "$out" \
  --progress plain -- "${plugin[@]}" -k check_accelerators -rs || status=1
echo "accelerator clauses: $(( $(date +%s) - start )) s"

echo "=== GPU checks"
timeout 200 "$py" ci/gpu_check.py --out "$out/gpu_check.json" --timeout 90 || status=1
echo "total: $(( $(date +%s) - start )) s, exit $status"
exit "$status"
