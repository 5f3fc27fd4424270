#!/usr/bin/env bash
# Everything CI runs. Fails when any step fails (the background ones are waited for).
# First come the README's two quick-start commands, verbatim, on this fresh checkout (read
# from the README by ci/readme_commands.py, so the two cannot drift): the main job (the
# suite against the reference), then the unit tests, with what the README installs.
# While the second installs, the fault matrix (also on docker) and the fault property run
# from a hard-linked copy of the first's venv (.venv-early: they need nothing the second
# adds), on the core the install leaves idle. As soon as the second has installed and its tests start, CI's
# own venv (.venv-ci) is made
# from the README's by ci/ci_venv.sh (hard links, then ci/setup.sh adds Ray and the pinned
# versions), and Ray's conformance run (the longest job) starts in the background, beside
# the README's unit tests. Then, beside it still: the tests the README's run skipped for
# want of Ray (ci/test.sh --after-readme), the docker provider's runs and Ray's cluster
# checks. Each background log is printed when it is done.
# (Before, Ray's suite started after the README's tests: 871 s in, ending the run alone at
# 2,251 s. A second venv installed from scratch beside the main job cost 126 s and every
# framework twice; the hard-linked copy costs 2 s.)
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
# a background step and everything under it (its pytest, Ray's GCS, raylet and workers),
# children first: killing the step's own process alone left its pytest running
killtree() { local c; for c in $(pgrep -P "$1"); do killtree "$c"; done; kill "$1" 2>/dev/null || true; }
cleanup() { for p in "${pids[@]}"; do killtree "$p"; done; ci/docker_engine.sh stop; }
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
# ccache, through which torch compiles C++ extensions when it finds one: DeepSpeed's CPU op
# costs 70 CPU-s to build in each fresh venv, and a second or so from the cache (the tests
# work without it, only slower)
if ! command -v ccache >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ccache >reports/ccache.log 2>&1 ||
      echo "ccache: not installed (see reports/ccache.log); C++ extensions build from scratch"
  fi
fi
step "docker engine, ccache"
python3 ci/readme_commands.py --only 1
step "README command 1 (main job)"
# The fault matrix (on processes, then with every node a container) and the fault property
# need only what the first command installed: they run from a copy of its venv while the
# second command installs (one core) and starts its tests. They mostly wait (pauses,
# intervals, restarts): alone, 125 s and 50 CPU-s.
ci/ci_venv.sh --copy .venv-early
faults_log=reports/faults.log
(
  . .venv-early/bin/activate
  python ci/fault_matrix.py --slice ci && python ci/fault_property.py --fits 200 || exit 1
  if timeout 10 docker info >/dev/null 2>&1; then
    # the docker provider's SDK (the `docker` extra, as pyproject.toml names it)
    python -m pip install -q $(python -c "import tomllib; print(' '.join(tomllib.load(
      open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docker']))") &&
      python ci/fault_matrix.py --slice ci --sim-provider docker
  else
    echo "docker provider: skipped, no Docker engine answers (see reports/dockerd.log)"
  fi
) > "$faults_log" 2>&1 &
faults_pid=$!; pids+=("$faults_pid")
readme_log=reports/readme-tests.log
python3 ci/readme_commands.py --only 2 > "$readme_log" 2>&1 &
readme_pid=$!; pids+=("$readme_pid")
ci/ci_venv.sh "$readme_pid"
step "CI venv (.venv-ci, beside the README's tests)"

# Ray's suite; its checks that build clusters of their own (`-m cluster`) run later
ray_log=reports/conformance-ray.log
.venv-ci/bin/python -m conformance run --impl ray --out reports --progress plain \
  -- -m "not cluster" > "$ray_log" 2>&1 &
ray_pid=$!; pids+=("$ray_pid")
finish "fault matrix and property, matrix on docker (beside the README's second command)" \
  "$faults_pid" "$faults_log"
finish "README command 2 (unit tests, beside Ray's suite)" "$readme_pid" "$readme_log"
[ "${#failed[@]}" = 0 ] || { printf 'failed: %s\n' "${failed[@]}"; exit 1; }
export VENV=.venv-ci
ci/test.sh --after-readme
step "lint, tests that need Ray (beside Ray's suite)"
. .venv-ci/bin/activate
# the checks that start clusters, again with every node a container
if timeout 10 docker info >/dev/null 2>&1; then
  python -m conformance run --impl reference --sim-provider docker --out reports/docker \
    --progress plain -- -m cluster
  step "docker provider (cluster checks)"
else
  echo "docker provider: skipped, no Docker engine answers (see reports/dockerd.log)"
fi
# Ray's cluster checks (ray.cluster_utils clusters, started and stopped by each check),
# while the rest of Ray's suite may still be running. (Tried: starting them in the
# background before the fault matrix. Both Ray runs then overlapped longer, and the whole
# took 2,111 s and 3,908 CPU-s against 2,090 s and 3,693 this way.)
python -m conformance run --impl ray --out reports/ray-cluster --progress plain -- -m cluster
step "conformance (ray, cluster checks)"
finish "conformance (ray)" "$ray_pid" "$ray_log"
step "total"
if [ ${#failed[@]} != 0 ]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
