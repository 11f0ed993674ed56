#!/usr/bin/env bash
# Start or stop the local multi-process stack without containers: Redis (if none is running),
# Celery workers per queue group, Flower, and the HTTP API when ATOMMEM_API__ADMIN_KEY is
# set. `stop` stops exactly what `start` started: the API and Flower, then the workers (each
# finishes the task in hand, Celery's warm shutdown, for up to the grace period), then Redis,
# last, so a stopping worker can still acknowledge its task. Redis keeps an append-only file in
# the run folder, so queued tasks survive a stop and start.
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
# Above broker.time_limit, as the containers' stop grace periods are.
GRACE="${ATOMMEM_STOP_GRACE_S:-$(( ${ATOMMEM_BROKER__TIME_LIMIT:-360} + 40 ))}"
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)  # absolute: redis-server resolves its paths from its own folder

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
    mkdir -p "$RUN/redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$RUN/redis" \
      --appendonly yes --appendfsync everysec --save "" --maxmemory-policy noeviction \
      --pidfile "$RUN/redis.pid" --logfile "$RUN/redis.log"
    for _ in $(seq 1 100); do
      [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
      sleep 0.1
    done
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
    echo "no ATOMMEM_STORE__QDRANT_URL: the embedded store (Qdrant Edge) lets one process open it,"
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

running() { kill -0 "$1" 2>/dev/null; }

stop_all() {  # grace seconds, names...: SIGTERM to each, wait for all, SIGKILL what is left
  local grace=$1 name i deadline waiting
  local names=() pids=()
  shift
  for name in "$@"; do
    [ -f "$RUN/$name.pid" ] || continue
    names+=("$name")
    pids+=("$(cat "$RUN/$name.pid")")  # kept: Redis deletes its pid file on the way out
  done
  for i in "${!pids[@]}"; do
    # start_bg runs each in a session of its own: the group takes the pool's children along.
    running "${pids[$i]}" && { kill -TERM -- "-${pids[$i]}" 2>/dev/null || kill -TERM "${pids[$i]}" 2>/dev/null || true; }
  done
  deadline=$((SECONDS + grace))
  while :; do
    waiting=()
    for i in "${!pids[@]}"; do running "${pids[$i]}" && waiting+=("$i"); done
    [ "${#waiting[@]}" -eq 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      for i in "${waiting[@]}"; do
        echo "${names[$i]} still running after ${grace}s: killing it" >&2
        kill -KILL -- "-${pids[$i]}" 2>/dev/null || kill -KILL "${pids[$i]}" 2>/dev/null || true
      done
      sleep 0.5
      break
    fi
    sleep 0.2
  done
  for i in "${!pids[@]}"; do
    rm -f "$RUN/${names[$i]}.pid"
    echo "stopped ${names[$i]} (pid ${pids[$i]})"
  done
}

stop() {
  local pidfile workers=()
  for pidfile in "$RUN"/worker-*.pid; do
    [ -e "$pidfile" ] && workers+=("$(basename "$pidfile" .pid)")
  done
  stop_all 30 api flower
  [ "${#workers[@]}" -gt 0 ] && stop_all "$GRACE" "${workers[@]}"
  stop_all 60 redis  # writes its append-only file on the way out
  return 0
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
