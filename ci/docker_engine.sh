#!/usr/bin/env bash
# A Docker engine for the docker provider's tests: `start` installs one when missing (as
# root, from the Debian package index) and starts it unless one already answers; `stop`
# stops only an engine `start` started. Where no engine can start, `start` says why and
# exits 0: the docker tests then skip with that reason.
# The engine runs without iptables, IP forwarding or the default bridge (nothing outside
# the networks a cluster creates itself), on the vfs storage driver (no overlay support
# needed). No registry is used: simcluster builds its image locally.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p reports
pidfile=reports/dockerd.pid
log=reports/dockerd.log

answers() { timeout 10 docker info >/dev/null 2>&1; }

case "${1:-}" in
start)
  if command -v docker >/dev/null && answers; then
    echo "docker engine: one already answers; using it"; exit 0
  fi
  if ! command -v dockerd >/dev/null; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      echo "docker engine: dockerd is not installed and cannot be installed here" \
           "(needs root and apt-get); the docker tests will skip"; exit 0
    fi
    echo "docker engine: installing docker.io"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -qq docker.io; } >"$log" 2>&1; then
      echo "docker engine: installing docker.io failed (see $log); the docker tests will skip"
      exit 0
    fi
  fi
  dockerd --iptables=false --ip-forward=false --bridge=none --storage-driver=vfs \
    >>"$log" 2>&1 &
  echo $! > "$pidfile"
  for _ in $(seq 60); do
    if answers; then echo "docker engine: started (pid $(cat "$pidfile"))"; exit 0; fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "docker engine: dockerd did not answer (see $log); the docker tests will skip"
  kill "$(cat "$pidfile")" 2>/dev/null; rm -f "$pidfile"
  exit 0
  ;;
stop)
  [ -f "$pidfile" ] || exit 0
  pid=$(cat "$pidfile"); rm -f "$pidfile"
  kill "$pid" 2>/dev/null || exit 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null; echo "docker engine: killed (it did not stop in 10 s)"
  ;;
*)
  echo "usage: $0 start|stop" >&2; exit 2
  ;;
esac
