#!/usr/bin/env bash
# Everything CI runs. Fails when any step fails (the background ones are waited for).
# First come the README's two quick-start commands, verbatim, on this fresh checkout (read
# from the README by ci/readme_commands.py, so the two cannot drift): the main job (the
# suite against the reference) and the unit tests, with what the README installs. Only then
# does ci/setup.sh add the rest (Ray, pinned versions).
# The Ray conformance run (the longest job, mostly waits on Ray's start-up and polls) starts
# then, in the background; beside it run the tests the README's run skipped for want of Ray
# (ci/test.sh --after-readme), the fault matrix, the fault property, the docker provider's
# runs and Ray's cluster checks. Its log is printed when it is done.
# (Tried and left: Ray's suite beside the README's unit tests, from a second venv installed
# beside the main job. On 2 cores the main job went from 161 to 487 s, every framework
# being installed twice, and the unit tests were 17% done after 8 minutes.)
# Each step prints the seconds since the start and the machine's CPU-seconds; the unit tests
# name their 25 slowest.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# the machine's CPU-seconds (user, nice, system; every process) since the start, beside the
# wall seconds: on 2 cores a step that waits shows fewer CPU-seconds than twice its seconds
cpu() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%d", ($2 + $3 + $4) / hz}' /proc/stat; }
cpu0=$(cpu)
step() { echo "$1: $(( $(date +%s) - start )) s (machine CPU $(( $(cpu) - cpu0 )) s)"; }
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
python3 ci/readme_commands.py
step "README quick start (main job, unit tests)"
ci/setup.sh
step "setup"

# Ray's suite; its checks that build clusters of their own (`-m cluster`) run later
ray_log=reports/conformance-ray.log
.venv/bin/python -m conformance run --impl ray --out reports --progress plain \
  -- -m "not cluster" > "$ray_log" 2>&1 &
ray_pid=$!; pids+=("$ray_pid")
ci/test.sh --after-readme
step "lint, tests that need Ray (beside Ray's suite)"
. .venv/bin/activate
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
