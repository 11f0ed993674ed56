#!/usr/bin/env bash
# Start or stop the local multi-process stack without containers: Redis (if none is running),
# Celery workers per queue group, Flower, and the HTTP API when ATOMMEM_API__ADMIN_KEY is
# set. `stop` stops exactly what `start` started.
#
#   bash infra/local/stack.sh start   # ATOMMEM_BROKER__URL defaults to redis://127.0.0.1:6379/0
#   bash infra/local/stack.sh status
#   bash infra/local/stack.sh stop
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN="${ATOMMEM_RUN_DIR:-.atommem/run}"
VENV="${ATOMMEM_VENV:-.venv}"
CELERY="$VENV/bin/celery"
export ATOMMEM_BROKER__URL="${ATOMMEM_BROKER__URL:-redis://127.0.0.1:6379/0}"
FLOWER_PORT="${ATOMMEM_FLOWER_PORT:-5555}"
API_PORT="${ATOMMEM_API_PORT:-8080}"
mkdir -p "$RUN"

redis_port() { python3 -c "import sys,urllib.parse as u; print(u.urlparse(sys.argv[1]).port or 6379)" "$ATOMMEM_BROKER__URL"; }

start_bg() {  # name, command...
  local name=$1; shift
  if [ -f "$RUN/$name.pid" ] && kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null; then
    echo "$name already running (pid $(cat "$RUN/$name.pid"))"; return
  fi
  setsid "$@" >"$RUN/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
  echo "started $name (pid $!, log $RUN/$name.log)"
}

start() {
  local port; port=$(redis_port)
  if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
    redis-server --daemonize yes --port "$port" --save "" --appendonly no \
      --pidfile "$PWD/$RUN/redis.pid" --logfile "$PWD/$RUN/redis.log"
    for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    echo "started redis on port $port (pid $(cat "$RUN/redis.pid"))"
  else
    echo "redis already running on port $port: using it, will not stop it"
  fi
  local common=(-A workers.celery_app worker -P threads -l info)
  if [ -n "${ATOMMEM_STORE__QDRANT_URL:-}" ]; then
    start_bg worker-extract "$CELERY" "${common[@]}" -Q extract -c 2 -n extract@%h
    start_bg worker-memory "$CELERY" "${common[@]}" -Q ingest,memory,profile -c 2 -n memory@%h
    start_bg worker-query "$CELERY" "${common[@]}" -Q query -c 4 -n query@%h
  else
    echo "no ATOMMEM_STORE__QDRANT_URL: Qdrant local mode lets one process open the store,"
    echo "so one worker process consumes every queue (set a Qdrant server URL to scale out)"
    start_bg worker-all "$CELERY" "${common[@]}" -Q ingest,extract,memory,profile,query -c 2 -n all@%h
  fi
  start_bg flower "$CELERY" -A workers.celery_app flower --port="$FLOWER_PORT"
  echo "Flower: http://127.0.0.1:$FLOWER_PORT"
  if [ -n "${ATOMMEM_API__ADMIN_KEY:-}" ]; then
    start_bg api "$VENV/bin/uvicorn" --factory api.main:create_app --host 127.0.0.1 --port "$API_PORT"
    echo "API: http://127.0.0.1:$API_PORT (docs at /docs)"
  else
    echo "no ATOMMEM_API__ADMIN_KEY: the HTTP API is not started (set one to manage tenants)"
  fi
}

stop() {
  local pidfile name pid
  for pidfile in "$RUN"/*.pid; do
    [ -e "$pidfile" ] || continue
    name=$(basename "$pidfile" .pid)
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      if [ "$name" = redis ]; then kill "$pid"; else kill -TERM -- "-$pid" 2>/dev/null || kill "$pid"; fi
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null || true
      echo "stopped $name (pid $pid)"
    fi
    rm -f "$pidfile"
  done
}

status() {
  local pidfile
  for pidfile in "$RUN"/*.pid; do
    [ -e "$pidfile" ] || { echo "nothing started"; return; }
    if kill -0 "$(cat "$pidfile")" 2>/dev/null; then state=running; else state=dead; fi
    echo "$(basename "$pidfile" .pid): $state (pid $(cat "$pidfile"))"
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: bash infra/local/stack.sh start|stop|status" >&2; exit 64 ;;
esac
