#!/usr/bin/env bash
# Idempotent set-up: .venv with sirius (editable) and its pinned dependencies, plus Debian's
# clang-22 (the same LLVM 22 that llvmlite 0.50 is built on). Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
CLANG_PKG="clang-22 llvm-22"

# opt-22 (the loop-fuse pass runs LLVM's loop fusion with it) comes with llvm-22, which
# clang-22 depends on
need_clang() { ! command -v clang-22 >/dev/null 2>&1 || ! command -v opt-22 >/dev/null 2>&1; }

if need_clang; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing Debian's $CLANG_PKG with apt-get"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $CLANG_PKG >/dev/null
    else
        echo "setup: clang-22 or opt-22 is missing and apt-get cannot be used here." >&2
        echo "setup: run this as root, then run 'make test' again:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y $CLANG_PKG" >&2
        exit 1
    fi
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PY" -m venv .venv
fi

# Re-install only when pyproject.toml changed since the last successful install.
STAMP=.venv/.sirius-installed
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    echo "setup: installing sirius and its pinned dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[dev]"
    touch "$STAMP"
fi

CUDA=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA/include/cuda_runtime.h" ]; then
    echo "setup: warning: no CUDA headers under $CUDA (set CUDA_HOME); compiling .cu files will fail" >&2
fi

# Byte-compile sirius (an editable install: pip compiled only the dependencies). Where
# PYTHONDONTWRITEBYTECODE is set (it is in our sessions' shells), no process writes these files,
# and every `sirius` command and test worker compiled all 170 modules from source again (a
# third of a second each time). Only changed files are compiled; a stale file is ignored.
.venv/bin/python -m compileall -q -j 0 sirius tests scripts >/dev/null
