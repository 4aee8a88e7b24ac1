"""The C runtime of the CPU executor: built once with clang, loaded with ctypes.

`sirius_rt.c` is compiled into the cache directory under a name that hashes its source and the
compiler, so an edited runtime is rebuilt and an unchanged one is reused. The library is also
loaded into the process with llvmlite's `load_library_permanently`, so JIT-compiled device code
resolves `sirius_rt_*` and `__nv_*` symbols against it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import subprocess
from pathlib import Path

from sirius.diagnostics import ToolchainError
from sirius.frontend.cache import cache_dir
from sirius.frontend.toolchain import cache_root, toolchain

SOURCE = Path(__file__).with_name("sirius_rt.c")

# Layout of `sirius_ctx` (the per-worker context JIT code reads); mirrors sirius_rt.c.
CTX_BYTES = 192
CTX_TID, CTX_NTID, CTX_CTAID, CTX_NCTAID = 0, 12, 24, 36
CTX_ICOUNT, CTX_GLD, CTX_GST, CTX_SLD, CTX_SST = 48, 56, 64, 72, 80
CTX_SMEM, CTX_SMEM_SIZE, CTX_SITE_RANGE = 96, 104, 112
CTX_FLOPS = 120  # three counters: f16, f32, f64 FLOPs (count_flops modules, flops.py)
# every counter the JIT code adds to (lowering.count_lines, access_lines)
CTX_COUNTERS = (CTX_ICOUNT, CTX_GLD, CTX_GST, CTX_SLD, CTX_SST,
                *(CTX_FLOPS + 8 * i for i in range(3)))


def ctx_field(off: int) -> str:
    """The JIT code's pointer to the context's field at byte `off`."""
    return f"getelementptr (i8, ptr @__sirius_ctx, i64 {off})" if off else "@__sirius_ctx"

ORDERS = {"forward": 0, "reverse": 1, "random": 2}
MODE_FAST, MODE_FIBERS, MODE_LOOPS = 0, 1, 2  # LaunchDesc.use_fibers
FAULT_NONE, FAULT_BOUNDS, FAULT_BARRIER, FAULT_WARP, FAULT_SIGNAL = 0, 1, 2, 3, 4
REDZONE_BYTES = 256  # checked after an unchecked launch (sirius_rt.c, check_redzones)

# Warp operations, as sirius_rt_warp numbers them.
W_SHFL_IDX, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_BFLY = 0, 1, 2, 3
W_BALLOT, W_ANY, W_ALL, W_UNI, W_SYNC, W_MATCH_ANY, W_ACTIVEMASK = 4, 5, 6, 7, 8, 9, 10


class LaunchDesc(ctypes.Structure):
    _fields_ = [
        ("nworkers", ctypes.c_int32),
        ("use_fibers", ctypes.c_int32),  # MODE_FAST, MODE_FIBERS or MODE_LOOPS
        ("ctx", ctypes.POINTER(ctypes.c_void_p)),
        ("fn", ctypes.POINTER(ctypes.c_void_p)),
        ("args", ctypes.POINTER(ctypes.c_void_p)),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("order", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("check_bounds", ctypes.c_int32),
        ("trace", ctypes.c_int32),
        ("nallocs", ctypes.c_int32),
        ("alloc_lo", ctypes.POINTER(ctypes.c_uint64)),
        ("alloc_hi", ctypes.POINTER(ctypes.c_uint64)),
        ("stack_bytes", ctypes.c_uint64),
        ("counters", ctypes.c_uint64 * 6),
        ("fault", ctypes.c_int32),
        ("fault_block", ctypes.c_uint32 * 3),
        ("fault_thread", ctypes.c_uint32 * 3),
        ("fault_addr", ctypes.c_uint64),
        ("fault_size", ctypes.c_uint32),
        ("fault_kind", ctypes.c_uint32),
        ("fault_site", ctypes.c_uint32),
        ("fault_waiting", ctypes.c_uint32),
        ("fault_exited", ctypes.c_uint32),
        ("trace_ptr", ctypes.POINTER(ctypes.c_void_p)),
        ("trace_len", ctypes.POINTER(ctypes.c_uint64)),
        ("cancel", ctypes.c_int32),
        ("fault_signal", ctypes.c_int32),
        ("fault_stack", ctypes.c_int32),
        ("nredzones", ctypes.c_int32),
        ("rz_lo", ctypes.POINTER(ctypes.c_uint64)),
        ("rz_hi", ctypes.POINTER(ctypes.c_uint64)),
        ("rz_dirty", ctypes.POINTER(ctypes.c_uint8)),
        ("rz_found", ctypes.c_int32),
        ("done", ctypes.POINTER(ctypes.c_uint64)),  # blocks done by worker i at [8 * i]
        ("frame_bytes", ctypes.c_uint64),  # MODE_LOOPS: each thread's frame
        ("block_list", ctypes.POINTER(ctypes.c_uint32)),  # or NULL: only these blocks
        ("nblock_list", ctypes.c_uint64),
        ("flops", ctypes.c_uint64 * 3),  # results: f16, f32, f64 FLOPs (count_flops modules)
    ]


def _build(out: Path, clang: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{id(out)}.tmp")
    cmd = [clang, "-O2", "-g", "-shared", "-fPIC", "-pthread", "-U_FORTIFY_SOURCE",
           "-fno-strict-aliasing", "-o", str(tmp), str(SOURCE), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolchainError(f"building the CPU executor's runtime failed:\n{r.stderr.strip()}")
    tmp.replace(out)  # atomic: a concurrent build never sees half a library


@functools.cache
def library() -> ctypes.CDLL:
    import llvmlite.binding as llvm

    tc = toolchain()
    h = hashlib.sha256(SOURCE.read_bytes() + tc.clang_version.encode()).hexdigest()[:16]
    path = cache_dir(cache_root(), "runtime") / f"sirius_rt_{h}.so"
    if not path.exists():
        _build(path, tc.clang)
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    llvm.load_library_permanently(str(path))
    lib.sirius_launch.argtypes = [ctypes.POINTER(LaunchDesc)]
    lib.sirius_launch.restype = ctypes.c_int
    return lib
