#!/usr/bin/env bash
# Everything CI runs, in order. Fails on the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
ci/setup.sh
echo "setup: $(( $(date +%s) - start )) s"
ci/test.sh
echo "tests: $(( $(date +%s) - start )) s"
ci/conformance.sh reference ray
echo "conformance: $(( $(date +%s) - start )) s"
. .venv/bin/activate
python ci/fault_matrix.py --slice ci
python ci/fault_property.py --fits 200
echo "total: $(( $(date +%s) - start )) s"
