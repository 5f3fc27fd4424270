#!/usr/bin/env bash
# Create the venv ($VENV, default .venv) if missing and install trainspec with the extras CI
# needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
# ci/constraints.txt pins every package to the versions CI was last proven with (pip's
# resolver need not search; regenerate with `pip freeze --exclude-editable` after a change)
python -m pip install -q -c ci/constraints.txt -e ".[dev,torch,ray,s3,lightning,transformers,xgboost,lightgbm,jax,tensorflow,tune,tracking,deepspeed,mutation]"
