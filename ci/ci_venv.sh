#!/usr/bin/env bash
# CI's venvs, made from the README's as hard links (about 2 s for 5 GB; pip and Python
# replace files rather than write into them, so neither venv changes the other's):
#   ci/ci_venv.sh PID          .venv-ci, once the README's second command (PID) has installed
#   ci/ci_venv.sh --copy DIR   DIR, a copy of .venv as it is now
# With PID it waits until that command's install is done (its pytest has started, or it
# ended), copies .venv, and lets ci/setup.sh add what the README leaves out (Ray, the pinned
# versions). So Ray's suite can start beside the README's unit tests rather than after them,
# and no framework is installed twice. `--copy` is for work that needs only what the
# README's first command installed (the fault matrix and property, beside the second
# command's install): the second command then installs into .venv, not into the copy.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

copy() {  # copy DIR: .venv as hard links, its scripts and pyvenv.cfg pointing at DIR
  [ -x .venv/bin/python ] || { echo "ci_venv: the README made no .venv" >&2; exit 1; }
  rm -rf "$1"
  cp -al .venv "$1"
  # scripts name their interpreter (and activate its venv) by absolute path; sed -i writes
  # a new file, so the README's own copies stay as they are (pyvenv.cfg too: `python -m
  # venv .venv` run again rewrites it in place)
  grep -lIr --null -e "$root/.venv" "$1/bin" "$1/pyvenv.cfg" | xargs -0 -r sed -i \
    "s#$root/\.venv\([^-A-Za-z0-9_.]\|\$\)#$root/$1\1#g"
  sed -i '' "$1/pyvenv.cfg"
}

if [ "${1:-}" = "--copy" ]; then
  copy "$2"
  exit 0
fi
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
copy .venv-ci
VENV=.venv-ci ci/setup.sh
