#!/usr/bin/env bash
# Prepare everything a lent GPU runs, here, before asking for the GPU (docs/gpu.md, "Carried
# directories"): the carried programs of the standard campaign and pycuda for the GPU machine's
# Python, in one tarball. A GPU session then spends its device minutes on the GPU.
#
#   scripts/gpu_prepare.sh [--only REGEX] [--jobs N]      (make gpu-carry)
#
# Writes .carry/VARIANT/STEM for
#   def       every corpus program (kernels/*.cu, kernels/tvm/*.cu, kernels/tvm/fp16/*.cu) and the
#             paper shapes bert_qkv, bert_layer, lstm, seq2seq, mlp, deepspeech2, resnext_block
#   grid, counters  the megakernel programs (lstm, seq2seq, deepspeech2, bert_layer, lstm_cell,
#             two_mm, stencil_pingpong, paper lstm and bert_layer)
#   def/grid/counters sync_chain_K  kernels/micro/sync_chain.cu at STEPS = 2, 8, 32, 128
# then .gpusite (scripts/build_pycuda_carry.sh, unless it is there) and .gpu/carry.tgz.
# A program that cannot be prepared is reported and left out; the others go on.
# On the GPU machine (the device tool's `run`, carry [".gpu"]):
#   tar xzf .gpu/carry.tgz && export PYTHONPATH=$PWD/.gpusite:$PWD && \
#   python3 scripts/gpu_campaign.py .carry $OUT/r --variants def,grid,counters --budget 300
set -uo pipefail
cd "$(dirname "$0")/.."
only="." jobs=2
while [ $# -gt 0 ]; do
    case "$1" in
        --only) only=${2:?}; shift 2 ;;
        --jobs) jobs=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "gpu_prepare: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x .venv/bin/sirius ] || { echo "gpu_prepare: run 'make setup' first" >&2; exit 2; }
for d in /.carry/ /.gpusite/ /.gpu/; do
    grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude
done

jobs_file=$(mktemp)
trap 'rm -f "$jobs_file"' EXIT
{
    for p in kernels/*.cu kernels/tvm/*.cu kernels/tvm/fp16/*.cu; do echo "def $p"; done
    for m in bert_qkv bert_layer lstm seq2seq mlp deepspeech2 resnext_block; do
        echo "def kernels/tvm/paper/$m.cu"
    done
    for p in kernels/tvm/lstm.cu kernels/tvm/seq2seq.cu kernels/tvm/deepspeech2.cu \
             kernels/tvm/bert_layer.cu kernels/lstm_cell.cu kernels/two_mm.cu \
             kernels/stencil_pingpong.cu kernels/tvm/paper/lstm.cu kernels/tvm/paper/bert_layer.cu; do
        echo "grid $p"; echo "counters $p"
    done
    for k in 2 8 32 128; do
        for v in def grid counters; do echo "$v kernels/micro/sync_chain.cu $k"; done
    done
} | grep -E -- "$only" > "$jobs_file"

one() {  # VARIANT PROGRAM [STEPS]
    local v=$1 p=$2 steps=${3:-} stem args=()
    stem=$(basename "$p" .cu)
    case $p in kernels/tvm/paper/*) stem=paper_$stem ;; esac
    [ -n "$steps" ] && { stem=${stem}_$steps; args+=(-D "STEPS=$steps" --unroll 256); }
    local npz=${p%.cu}.npz
    [ -f "$npz" ] && args+=(--inputs "$npz")
    [ "$v" != def ] && args+=(--megakernel "$v")
    local out=.carry/$v/$stem log
    log=$(mktemp)
    if .venv/bin/sirius bench "$p" --arch sm_90 -q "${args[@]}" --prepare "$out" >"$log" 2>&1; then
        rm -f "$out/fused.ll"  # not needed there; the largest file
        echo "prepared $out"
    else
        echo "LEFT OUT $out: $(tail -2 "$log" | tr '\n' ' ')"
        rm -rf "$out"
    fi
    rm -f "$log"
}
export -f one
echo "gpu_prepare: $(wc -l < "$jobs_file") programs on $jobs cores"
xargs -P "$jobs" -L1 bash -c 'one "$@"' _ < "$jobs_file"

[ -d .gpusite/pycuda ] || bash scripts/build_pycuda_carry.sh .gpusite || {
    echo "gpu_prepare: pycuda could not be built (see above)" >&2; exit 1; }
mkdir -p .gpu
tar czf .gpu/carry.tgz .carry .gpusite
echo "gpu_prepare: .gpu/carry.tgz, $(du -h .gpu/carry.tgz | cut -f1) (carry [\".gpu\"])"
