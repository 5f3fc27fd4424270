#!/usr/bin/env bash
# Lint and unit tests (the README's test command).
#   ci/test.sh               lint, then every unit test (what a developer runs)
#   ci/test.sh --after-readme  lint, then only the tests the README's run skipped for want of
#                            Ray (CI: the README's commands ran the rest, verbatim, first)
set -euo pipefail
cd "$(dirname "$0")/.."
. "${VENV:-.venv}/bin/activate"
ruff check .
lint-imports
python -m conformance spec --check
if [ "${1:-}" = "--after-readme" ]; then
  python ci/rerun_skipped.py reports/readme-tests.xml -- -n 2 --durations=10
else
  pytest -n 2 --durations=25 tests/
fi
