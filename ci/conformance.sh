#!/usr/bin/env bash
# The conformance suite against one implementation (default: both), reports in reports/.
set -euo pipefail
cd "$(dirname "$0")/.."
. "${VENV:-.venv}/bin/activate"
for impl in "${@:-reference ray}"; do
  for one in $impl; do
    echo "=== conformance suite against $one"
    python -m conformance run --impl "$one" --out reports
  done
done
