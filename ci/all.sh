#!/usr/bin/env bash
# Everything CI runs, in order. Fails on the first failing step.
# The Ray conformance runs (the longest jobs) start right after the set-up and run beside
# everything else; their log is printed when done. Each step prints the seconds since the
# start, and the unit tests name their 25 slowest (the steps CI time is made of).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
ci/setup.sh
echo "setup: $(( $(date +%s) - start )) s"
# Ray's conformance runs (the longest jobs, mostly Ray's own start-up and health-check
# waits) run in the background from here, beside the unit tests and the reference's jobs:
# first the checks on the local session, then those that build ray.cluster_utils clusters
# of their own (`-m cluster`), one Ray at a time; their log is printed when done.
mkdir -p reports
ray_log=reports/conformance-ray.log
(
  . .venv/bin/activate
  t0=$(date +%s)
  status=0
  python -m conformance run --impl ray --out reports --progress plain -- -m "not cluster" \
    || status=$?
  echo "conformance (ray, local session): $(( $(date +%s) - t0 )) s"
  python -m conformance run --impl ray --out reports/ray-cluster --progress plain -- -m cluster \
    || status=$?
  echo "conformance (ray, cluster checks): $(( $(date +%s) - t0 )) s"
  exit "$status"
) > "$ray_log" 2>&1 &
ray_pid=$!
# a Docker engine for the docker provider (installed and started here if need be, stopped
# at the end if this started it); without one the docker tests and jobs skip, saying why
ci/docker_engine.sh start
trap 'kill "$ray_pid" 2>/dev/null || true; ci/docker_engine.sh stop' EXIT
ci/test.sh
echo "tests: $(( $(date +%s) - start )) s"
. .venv/bin/activate
ci/conformance.sh reference
echo "conformance (reference): $(( $(date +%s) - start )) s"
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
ray_status=0
wait "$ray_pid" || ray_status=$?
trap 'ci/docker_engine.sh stop' EXIT
cat "$ray_log"
echo "conformance (ray): exit $ray_status, $(( $(date +%s) - start )) s"
echo "total: $(( $(date +%s) - start )) s"
exit "$ray_status"
