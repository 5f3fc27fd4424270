#!/usr/bin/env bash
# Create .venv (if missing) and install trainspec with the extras CI needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e ".[dev,torch,ray,s3,lightning,transformers,xgboost,lightgbm,jax,tensorflow,tune,deepspeed,mutation]"
