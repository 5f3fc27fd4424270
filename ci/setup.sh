#!/usr/bin/env bash
# Create the venv (if missing) and install trainspec with the extras CI needs.
#   ci/setup.sh                 everything into $VENV (default .venv): what a developer runs
#   ci/setup.sh --deps-only     only the pinned packages, not trainspec itself
#   ci/setup.sh --project-only  trainspec itself (editable), its packages already there
# CI installs its venv (VENV=.venv-ci) in the two halves: the packages while the README's
# main job runs in .venv, trainspec after it (an editable install writes
# trainspec.egg-info into the checkout, so two must not run at once).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS="dev,torch,ray,s3,lightning,transformers,xgboost,lightgbm,jax,tensorflow,tune,deepspeed,mutation"
case "${1:-}" in
  ""|--deps-only|--project-only) ;;
  *) echo "ci/setup.sh: unknown option ${1} (allowed: --deps-only, --project-only)" >&2
     exit 2 ;;
esac
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
if [ "${1:-}" != --project-only ]; then
  python -m pip install -q --upgrade pip
fi
# ci/constraints.txt pins every package to the versions CI was last proven with (pip's
# resolver need not search; regenerate with `pip freeze --exclude-editable` after a change)
if [ "${1:-}" = --deps-only ]; then
  python -m pip install -q -c ci/constraints.txt -r ci/constraints.txt
else
  python -m pip install -q -c ci/constraints.txt -e ".[$EXTRAS]"
fi
