#!/usr/bin/env bash
# Lint and unit tests (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
ruff check .
lint-imports
python -m conformance spec --check
pytest -n 2 --durations=25 tests/
