#!/usr/bin/env bash
# CI's own venv, .venv-ci, made from the README's while the README's test command runs:
#   ci/ci_venv.sh PID    PID: the process running the README's second command
# It waits until that command's install is done (its pytest has started, or it ended), then
# copies .venv as hard links (about 2 s for 5 GB; pip and Python replace files rather than
# write into them, so neither venv changes the other's), points the copy's scripts at the
# copy, and lets ci/setup.sh add what the README leaves out (Ray, the pinned versions).
# So Ray's suite can start beside the README's unit tests rather than after them, and no
# framework is installed twice.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
readme_pid=$1
waited=0
# the README's pytest: `<root>/.venv/bin/pytest ...` once `activate` put it first on PATH
until pgrep -f "$root/.venv/bin/pytest" >/dev/null || ! kill -0 "$readme_pid" 2>/dev/null; do
  sleep 1
  waited=$((waited + 1))
  if [ "$waited" -ge 1200 ]; then
    echo "ci_venv: the README's tests did not start within 1200 s" >&2
    exit 1
  fi
done
[ -x .venv/bin/python ] || { echo "ci_venv: the README made no .venv" >&2; exit 1; }
rm -rf .venv-ci
cp -al .venv .venv-ci
# scripts name their interpreter (and activate its venv) by absolute path; sed -i writes a
# new file, so the README's own copies stay as they are
grep -lIr --null -e "$root/.venv" .venv-ci/bin | xargs -0 -r sed -i \
  "s#$root/\.venv\([^-A-Za-z0-9_.]\|\$\)#$root/.venv-ci\1#g"
VENV=.venv-ci ci/setup.sh
