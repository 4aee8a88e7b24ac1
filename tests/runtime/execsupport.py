"""Helpers for the CPU-executor tests: cached runs, float32 error bounds, IR block sizes.

Error bounds. Every reference here is computed from the executor's own saved inputs
(`RunResult.initial`), so the only differences left are float32 rounding. The device IR is
compiled with clang's CUDA default `-ffp-contract=fast`, so `a * b + c` may be one fused
multiply-add on the CPU (one rounding) where numpy rounds twice; sums are accumulated in the
kernels' own order. We therefore either emulate the kernel's exact float32 operation order (and
demand bitwise equality) where no contraction is possible, or compare against a float64 reference
with the classical forward error bound of a sum of n rounded terms:
    |computed - exact| <= gamma(n) * sum |term_i|,   gamma(n) = n u / (1 - n u),  u = 2^-24,
which holds for any summation order and with or without fused multiply-adds (Higham, "Accuracy
and Stability of Numerical Algorithms", 2nd ed., eq. 3.5).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from sirius.analysis.program import analyse
from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.interpreter import RunResult, run_host_program

ROOT = Path(__file__).resolve().parent.parent.parent
KERNELS = ROOT / "kernels"
PROGRAMS = Path(__file__).resolve().parent / "programs"

U32 = 2.0 ** -24  # unit roundoff of float32


def program_path(name: str) -> Path:
    """`block_reduce.cu` -> kernels/block_reduce.cu; `programs/x.cu` -> tests/runtime/programs."""
    if name.startswith("programs/"):
        return PROGRAMS / name.removeprefix("programs/")
    return KERNELS / name


@functools.cache
def analysed(name: str):
    """(Program, kernel facts, HostProgram) of a program, once per test process: compiling is
    cached on disk, but reading the IR back and extracting the host model is 95% of a run."""
    return analyse([program_path(name)])


def run(name: str, *, seed: int = 0, order: str = "forward", inputs: dict | None = None,
        check_bounds: bool = False, jobs: int | None = None, opaque_trips: int = 3) -> RunResult:
    """Run a program on the CPU executor (always a fresh run): what `run_program` does, with the
    analysis cached (test_exec_orders checks that both give the same result)."""
    program, kernels, host = analysed(name)
    device = CpuDevice(order=order, seed=seed, jobs=jobs, check_bounds=check_bounds)
    return run_host_program(host, program, kernels, device, seed=seed, inputs=inputs,
                            opaque_trips=opaque_trips, order=order)


@functools.cache
def run_cached(name: str, seed: int = 0, order: str = "forward", opaque_trips: int = 3,
               check_bounds: bool = False, jobs: int | None = None) -> RunResult:
    """A run without given inputs, shared by the tests of one worker (do not mutate it)."""
    return run(name, seed=seed, order=order, opaque_trips=opaque_trips,
               check_bounds=check_bounds, jobs=jobs)


def gamma(n: int | np.ndarray) -> np.ndarray:
    nu = np.asarray(n, dtype=np.float64) * U32
    return nu / (1.0 - nu)


def assert_within(got: np.ndarray, ref: np.ndarray, tol: np.ndarray | float, what: str) -> None:
    """|got - ref| <= tol elementwise (ref in float64), with a readable failure."""
    got64 = np.asarray(got, dtype=np.float64)
    ref64 = np.asarray(ref, dtype=np.float64)
    assert got64.shape == ref64.shape, f"{what}: shape {got64.shape} != {ref64.shape}"
    err = np.abs(got64 - ref64)
    tol_arr = np.broadcast_to(np.asarray(tol, dtype=np.float64), err.shape)
    bad = ~(err <= tol_arr)
    if bad.any():
        k = int(np.argmax(np.where(bad, err - tol_arr, -np.inf)))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {err.size} elements off; worst at flat index {k}: "
            f"got {got64.flat[k]!r}, expected {ref64.flat[k]!r}, error {err.flat[k]:.3g} "
            f"> tolerance {tol_arr.flat[k]:.3g}")


def assert_bitwise(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    ref = np.asarray(ref, dtype=got.dtype)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    same = got.view(f"u{got.dtype.itemsize}") == ref.view(f"u{ref.dtype.itemsize}")
    if not same.all():
        k = int(np.argmin(same))
        raise AssertionError(f"{what}: {int((~same).sum())} of {same.size} elements differ; "
                             f"first at flat index {k}: got {got.flat[k]!r}, "
                             f"expected {ref.flat[k]!r}")


def counters(stats) -> tuple:
    """Every deterministic field of a LaunchStats (all but the wall time)."""
    return (stats.kernel, stats.grid, stats.block, stats.smem, stats.instructions,
            stats.global_load_bytes, stats.global_store_bytes, stats.shared_load_bytes,
            stats.shared_store_bytes, stats.barriers, stats.mode)


def ir_block_sizes(device_ir: str, kernel: str) -> dict[str, int]:
    """Instructions per basic block of the kernel whose source name is `kernel` (as LLVM prints
    it: one instruction per line indented by two spaces; `#dbg_` records are not instructions)."""
    fn = re.search(r"^define [^\n]*@_Z\d+" + re.escape(kernel) + r"[^\n]*\{\n(.*?)^\}",
                   device_ir, re.S | re.M)
    assert fn, f"kernel {kernel} not found in the device IR"
    sizes: dict[str, int] = {}
    block = "entry"
    for line in fn.group(1).splitlines():
        label = re.match(r"^([\w.]+):", line)
        if label:
            block = label.group(1)
            continue
        s = line.strip()
        if line.startswith("  ") and s and not s.startswith(("#dbg_", ";")):
            sizes[block] = sizes.get(block, 0) + 1
    return sizes
