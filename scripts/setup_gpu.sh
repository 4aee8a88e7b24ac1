#!/usr/bin/env bash
# `make setup-gpu`: build pycuda against the CUDA toolkit found here and install sirius's [gpu]
# extra (pycuda, cuda-python). Says what is missing when it cannot. docs/gpu.md.
#
#   scripts/setup_gpu.sh                         into .venv (run `make setup` first)
#   scripts/setup_gpu.sh --target DIR --find-links WHEELS
#                                                pycuda alone into DIR, offline, from the sdist and
#                                                wheels in WHEELS (a lent GPU machine: see
#                                                ../shared/gpu/prepare-carry.sh)
#
# pycuda has no wheels: its build needs cuda.h and a libcuda.so to link against (the NVIDIA
# driver's, or the toolkit's stub). Without a siteconf.py it takes nvcc's ../ as the toolkit;
# with nvcc not on PATH, or /usr/local/bin/nvcc a wrapper script (as on these machines), it
# looks under /usr/local/include and fails with "src/cpp/cuda.hpp: fatal error: cuda.h: No such
# file or directory". This script finds the toolkit ($CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, where
# nvcc on PATH says it lives, /usr/local/cuda), writes pycuda's siteconf.py with its
# configure.py, and exports CUDA_ROOT, CPATH and LIBRARY_PATH for the build.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup-gpu: $*" >&2; }
fail() { say "error: $*"; exit 1; }

target="" links=""
while [ $# -gt 0 ]; do
    case "$1" in
        --target) target=${2:?--target needs a directory}; shift 2 ;;
        --find-links) links=${2:?--find-links needs a directory}; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) fail "unknown argument $1 (see --help)" ;;
    esac
done
if [ -n "$target" ]; then
    PY=${PYTHON:-python3}
else
    PY=${PYTHON:-.venv/bin/python}
    [ -x "$PY" ] || fail "no .venv here: run 'make setup' first (or give --target DIR)"
fi
PY=$(command -v "$PY") || fail "no Python at $PY"
case $PY in /*) ;; *) PY=$PWD/$PY ;; esac  # the build runs in another directory
PYCUDA=${PYCUDA_VERSION:-2026.1}

# 1. the toolkit and cuda.h ------------------------------------------------------------------
cuda=""
for c in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "${CUDA_ROOT:-}"; do
    if [ -n "$c" ] && [ -d "$c" ]; then cuda=$c; break; fi
done
if [ -z "$cuda" ] && command -v nvcc >/dev/null 2>&1; then
    # nvcc itself says where it lives (`_HERE_`): /usr/local/bin/nvcc may be a wrapper script,
    # and pycuda's own guess (nvcc's ../) would then be /usr/local, without cuda.h
    here=$(nvcc --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -1)
    [ -n "$here" ] || here=$(dirname "$(readlink -f "$(command -v nvcc)")")
    cuda=$(dirname "$here")
fi
if [ -z "$cuda" ] && [ -x /usr/local/cuda/bin/nvcc ]; then cuda=/usr/local/cuda; fi
[ -n "$cuda" ] || fail "no CUDA toolkit found: set CUDA_HOME to its root or put nvcc on PATH
  (looked at \$CUDA_HOME, \$CUDA_PATH, \$CUDA_ROOT, nvcc on PATH, /usr/local/cuda)"
cuda=$(readlink -f "$cuda")
[ -f "$cuda/include/cuda.h" ] || fail "no cuda.h in $cuda/include: pycuda is compiled against
  the CUDA driver API header; install the toolkit's headers (Debian/Ubuntu with NVIDIA's
  repository: cuda-driver-dev-<version>) or point CUDA_HOME at a complete toolkit"
say "CUDA toolkit: $cuda ($([ -x "$cuda/bin/nvcc" ] && "$cuda/bin/nvcc" --version | tail -1 || echo 'no nvcc'))"

libdirs=()
for d in "$cuda/lib64" "$cuda/lib" "$cuda"/targets/*/lib; do
    [ -d "$d" ] && libdirs+=("$d")
done

# 2. libcuda: the driver's libcuda.so.1, else the toolkit's stub -----------------------------
driver_lib=""
ld=${LD_LIBRARY_PATH:-}
for d in ${ld//:/ } /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
         /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib/wsl/lib; do
    if [ -e "$d/libcuda.so.1" ]; then driver_lib=$d/libcuda.so.1; break; fi
done
if [ -z "$driver_lib" ]; then
    driver_lib=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}' || true)
fi
stub=""
for d in "$cuda/lib64/stubs" "$cuda/lib/stubs" "$cuda"/targets/*/lib/stubs; do
    if [ -f "$d/libcuda.so" ]; then stub=$d/libcuda.so; break; fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/sirius-setup-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lib"
if [ -n "$driver_lib" ]; then
    say "CUDA driver library: $driver_lib"
    ln -s "$driver_lib" "$work/lib/libcuda.so"  # the link-time name pycuda asks for (-lcuda)
elif [ -n "$stub" ]; then
    say "warning: no NVIDIA driver here (no libcuda.so.1): pycuda is linked against the stub"
    say "  $stub and will only import on a machine with a driver and a GPU"
    ln -s "$stub" "$work/lib/libcuda.so"
else
    fail "no libcuda: pycuda links against the CUDA driver library, and this machine has
  neither the NVIDIA driver's libcuda.so.1 (looked in \$LD_LIBRARY_PATH, /usr/local/nvidia/lib64,
  /usr/lib/*-linux-gnu, /usr/lib64 and ldconfig's cache) nor the toolkit's stub
  ($cuda/lib64/stubs/libcuda.so). On a GPU machine, install the NVIDIA driver; to build
  without one, install the toolkit's stub (NVIDIA's repository: cuda-driver-dev-<version>)."
fi

curand=--no-cuda-enable-curand
if [ -f "$cuda/include/curand.h" ] && [ ${#libdirs[@]} -gt 0 ] \
        && ls "${libdirs[@]/%//libcurand.so}" >/dev/null 2>&1; then
    curand=--cuda-enable-curand
else
    say "note: no cuRAND in the toolkit: pycuda is built without pycuda.curandom (sirius does not use it)"
fi

# 3. build and install ------------------------------------------------------------------------
export CUDA_ROOT=$cuda CUDA_HOME=$cuda PATH="$cuda/bin:$PATH"
export CPATH="$cuda/include${CPATH:+:$CPATH}"
joined=$(IFS=:; echo "$work/lib:${libdirs[*]}")
export LIBRARY_PATH="$joined${LIBRARY_PATH:+:$LIBRARY_PATH}"
pipargs=(-q)
offline=()
if [ -n "$links" ]; then offline=(--no-index --find-links "$links" --no-build-isolation); fi

mkdir -p "$work/src"
if [ -n "$links" ]; then
    sdist="$links/pycuda-$PYCUDA.tar.gz"
    [ -f "$sdist" ] || fail "no $sdist (../shared/gpu/prepare-carry.sh downloads it)"
    cp "$sdist" "$work/src/"
else
    say "fetching pycuda $PYCUDA's source"
    "$PY" -m pip download -q --no-deps --no-binary pycuda -d "$work/src" "pycuda==$PYCUDA" \
        || fail "cannot get pycuda $PYCUDA's source (no registry here? give --find-links DIR)"
fi
tar -xzf "$work"/src/pycuda-*.tar.gz -C "$work/src"
src=$(echo "$work"/src/pycuda-*/)
libcsv=$(IFS=,; echo "$work/lib,${libdirs[*]}")
(cd "$src" && "$PY" configure.py --cuda-root="$cuda" --cuda-inc-dir="$cuda/include" \
    --cudadrv-lib-dir="$libcsv" --cudart-lib-dir="$libcsv" --curand-lib-dir="$libcsv" \
    "$curand" >/dev/null) || fail "pycuda's configure.py failed"

if [ -n "$links" ] && ! "$PY" -c "import setuptools, wheel, numpy" 2>/dev/null; then
    # offline, pip builds with this Python's own setuptools, wheel and numpy
    "$PY" -m pip install -q --no-index --find-links "$links" --target "$work/buildenv" \
        setuptools wheel >/dev/null 2>&1 || true
    export PYTHONPATH="$work/buildenv${PYTHONPATH:+:$PYTHONPATH}"
    PYTHONPATH="$work/buildenv" "$PY" -c "import setuptools, wheel, numpy" 2>/dev/null \
        || fail "an offline build needs setuptools, wheel and numpy in $PY (pip's
  --no-build-isolation): install them there, or put their wheels into $links"
fi
say "building pycuda (a few minutes)"
log="$work/build.log"
if [ -n "$target" ]; then
    dest=(--target "$target")
else
    dest=()
fi
if ! "$PY" -m pip install "${pipargs[@]}" "${offline[@]}" "${dest[@]}" "$src" >"$log" 2>&1; then
    grep -E "fatal error|error:|cannot find -l|undefined reference" "$log" | head -8 >&2 || true
    cp "$log" "${TMPDIR:-/tmp}/sirius-setup-gpu.log"
    fail "pycuda did not build (log: ${TMPDIR:-/tmp}/sirius-setup-gpu.log)"
fi
if [ -z "$target" ]; then
    say "installing sirius[gpu] (cuda-python too)"
    "$PY" -m pip install -q -e ".[gpu]" || fail "pip install -e '.[gpu]' failed"
fi

# 4. what works now -----------------------------------------------------------------------------
check='
import sys
try:
    import pycuda.driver as d
except ImportError as e:
    print("pycuda is installed, but cannot load:", e); sys.exit(3)
try:
    d.init(); dev = d.Device(0)
except Exception as e:
    print("pycuda is installed; the CUDA driver found no GPU:", e); sys.exit(4)
print("pycuda is installed and sees", dev.name(), "(compute capability %d.%d)" % dev.compute_capability())
'
status=0
PYTHONPATH="${target:+$target:}${PYTHONPATH:-}" "$PY" -c "$check" >&2 || status=$?
case $status in
    0) say "done: sirius run --device gpu, sirius verify --device gpu and sirius bench work here" ;;
    3) say "done, but no NVIDIA driver here: GPU commands will say so; they work on a GPU machine" ;;
    4) say "done, but no GPU is visible: GPU commands will say so" ;;
    *) fail "the check of the installed pycuda failed" ;;
esac
