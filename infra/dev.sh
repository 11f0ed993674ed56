#!/usr/bin/env bash
# Local entry points: `demo` runs the main job on embedded defaults, `test` runs the suite.
# Both create .venv on first use (CPU torch first, so no CUDA build is pulled in).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${ATOMMEM_VENV:-.venv}"

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.atommem-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "installing into $VENV (first run takes a few minutes)..." >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
    "$VENV/bin/python" -m pip install -q -e ".[test]"
    touch "$stamp"
  fi
}

case "${1:-}" in
  demo)
    setup
    shift
    exec "$VENV/bin/atommem" demo "$@"
    ;;
  test)
    setup
    shift
    exec "$VENV/bin/python" -m pytest "$@"
    ;;
  *)
    echo "usage: bash infra/dev.sh demo|test [args...]" >&2
    exit 64
    ;;
esac
