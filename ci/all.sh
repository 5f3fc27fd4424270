#!/usr/bin/env bash
# Everything CI runs, in order. Fails on the first failing step.
# The Ray conformance run (the longest job, mostly Ray's own start-up and health-check waits)
# runs beside the reference's jobs that follow the unit tests; its log is printed when done.
# Each step prints the seconds since the start, and the unit tests name their 25 slowest.
# First come the README's two quick-start commands, verbatim, on this fresh checkout (read
# from the README by ci/readme_commands.py, so the two cannot drift): the main job (the
# suite against the reference) and the unit tests, with what the README installs. Only then
# does ci/setup.sh add the rest (Ray, pinned versions), and the tests that skipped for want
# of Ray run once more (ci/test.sh --after-readme).
# (Starting Ray's runs beside the unit tests was tried: on 2 cores it slowed both, the unit
# tests from 23 to 40 minutes, and timing tests failed under that load.)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# a Docker engine for the docker provider (installed and started here if need be, stopped
# at the end if this started it); without one the docker tests and jobs skip, saying why
ci/docker_engine.sh start
trap 'ci/docker_engine.sh stop' EXIT
echo "docker engine: $(( $(date +%s) - start )) s"
python3 ci/readme_commands.py
echo "README quick start (main job, unit tests): $(( $(date +%s) - start )) s"
ci/setup.sh
echo "setup: $(( $(date +%s) - start )) s"
ci/test.sh --after-readme
echo "lint, tests that need Ray: $(( $(date +%s) - start )) s"
mkdir -p reports
ray_log=reports/conformance-ray.log
# Ray's checks that build clusters of their own (`-m cluster`) run later, beside the rest
. .venv/bin/activate
python -m conformance run --impl ray --out reports --progress plain -- -m "not cluster" \
  > "$ray_log" 2>&1 &
ray_pid=$!
trap 'kill "$ray_pid" 2>/dev/null || true; ci/docker_engine.sh stop' EXIT
python ci/fault_matrix.py --slice ci
python ci/fault_property.py --fits 200
echo "fault matrix and property: $(( $(date +%s) - start )) s"
# the checks that start clusters, and the matrix slice, again with every node a container
if timeout 10 docker info >/dev/null 2>&1; then
  python -m conformance run --impl reference --sim-provider docker --out reports/docker \
    --progress plain -- -m cluster
  python ci/fault_matrix.py --slice ci --sim-provider docker
  echo "docker provider (cluster checks, matrix slice): $(( $(date +%s) - start )) s"
else
  echo "docker provider: skipped, no Docker engine answers (see reports/dockerd.log)"
fi
# Ray's cluster checks (ray.cluster_utils clusters, started and stopped by each check),
# while the rest of Ray's suite is still running: both mostly wait on Ray's start-up
python -m conformance run --impl ray --out reports/ray-cluster --progress plain -- -m cluster
echo "conformance (ray, cluster checks): $(( $(date +%s) - start )) s"
ray_status=0
wait "$ray_pid" || ray_status=$?
trap 'ci/docker_engine.sh stop' EXIT
cat "$ray_log"
echo "conformance (ray): exit $ray_status, $(( $(date +%s) - start )) s"
echo "total: $(( $(date +%s) - start )) s"
exit "$ray_status"
