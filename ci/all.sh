#!/usr/bin/env bash
# Everything CI runs. Fails when any step fails (the background ones are waited for).
# First come the README's two quick-start commands, verbatim, in a fresh .venv that nothing
# else installs into (read from the README by ci/readme_commands.py, so the two cannot
# drift): the main job (the suite against the reference), then the unit tests, with what
# the README installs. The rest of CI uses a venv of its own, .venv-ci (Ray and the pinned
# versions, ci/setup.sh), whose packages install while the main job runs.
# The Ray conformance run (the longest job, mostly waits on Ray's start-up and polls, its
# workers niced by Ray) runs beside the unit tests; its log is printed when done. After the
# unit tests, the tests they skipped for want of Ray run in .venv-ci, beside the fault
# matrix, the fault property, the docker provider's runs and Ray's cluster checks.
# Each step prints the seconds since the start; the unit tests name their 25 slowest.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo "$1: $(( $(date +%s) - start )) s"; }
mkdir -p reports
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; ci/docker_engine.sh stop; }
trap cleanup EXIT
# waits for a background step; prints its log; remembers a failure
failed=()
finish() {  # finish NAME PID LOG
  local code=0
  wait "$2" || code=$?
  cat "$3"
  step "$1: exit $code"
  [ "$code" = 0 ] || failed+=("$1 (exit $code, log $3)")
}
# a Docker engine for the docker provider (installed and started here if need be, stopped
# at the end if this started it); without one the docker tests and jobs skip, saying why
ci/docker_engine.sh start
step "docker engine"

VENV=.venv-ci ci/setup.sh --deps-only > reports/setup.log 2>&1 &
setup_pid=$!; pids+=("$setup_pid")
python3 ci/readme_commands.py --only 1
step "README command 1 (the main job)"
finish "CI venv packages (beside command 1)" "$setup_pid" reports/setup.log
[ ${#failed[@]} = 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
VENV=.venv-ci ci/setup.sh --project-only
step "CI venv (trainspec installed)"

# Ray's suite, checks that build clusters of their own (`-m cluster`) later
ray_log=reports/conformance-ray.log
.venv-ci/bin/python -m conformance run --impl ray --out reports --progress plain \
  -- -m "not cluster" > "$ray_log" 2>&1 &
ray_pid=$!; pids+=("$ray_pid")
python3 ci/readme_commands.py --only 2
step "README command 2 (the unit tests, beside Ray's suite)"

VENV=.venv-ci ci/test.sh --after-readme > reports/after-readme.log 2>&1 &
after_pid=$!; pids+=("$after_pid")
. .venv-ci/bin/activate
python ci/fault_matrix.py --slice ci
python ci/fault_property.py --fits 200
step "fault matrix and property"
# the checks that start clusters, and the matrix slice, again with every node a container
if timeout 10 docker info >/dev/null 2>&1; then
  python -m conformance run --impl reference --sim-provider docker --out reports/docker \
    --progress plain -- -m cluster
  python ci/fault_matrix.py --slice ci --sim-provider docker
  step "docker provider (cluster checks, matrix slice)"
else
  echo "docker provider: skipped, no Docker engine answers (see reports/dockerd.log)"
fi
finish "lint, tests that need Ray" "$after_pid" reports/after-readme.log
# Ray's cluster checks (ray.cluster_utils clusters, started and stopped by each check),
# while the rest of Ray's suite may still be running: both mostly wait on Ray's start-up
python -m conformance run --impl ray --out reports/ray-cluster --progress plain -- -m cluster
step "conformance (ray, cluster checks)"
finish "conformance (ray)" "$ray_pid" "$ray_log"
step "total"
if [ ${#failed[@]} != 0 ]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
