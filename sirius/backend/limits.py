"""Per-architecture resource limits, and the check that rejects a kernel that breaks one.

The numbers are NVIDIA's (CUDA C Programming Guide, "Compute Capabilities" table; CUDA 12/13):
every architecture here allows 1024 threads and 64 K 32-bit registers per block, 255 registers
per thread and 48 KiB of static shared memory per block; the opt-in maximum of dynamic shared
memory per block and the shared memory per SM differ. Registers are allocated per warp in units
of 256 (8 per thread), which is what the per-block register check rounds to.

A kernel is rejected (`ResourceLimitError`) when it spills (ptxas reports spill stores or loads)
or when, for the launch it will get, it exceeds a limit; the message names the kernel and the
limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sirius.backend.ptxas import KernelResources
from sirius.diagnostics import SiriusError

KIB = 1024


@dataclass(frozen=True, slots=True)
class ArchLimits:
    arch: str
    max_threads_per_block: int
    max_registers_per_thread: int
    max_registers_per_block: int
    registers_per_sm: int
    max_static_smem_per_block: int
    max_smem_per_block_optin: int  # static + dynamic, after cudaFuncSetAttribute
    smem_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    register_alloc_unit: int = 256  # registers per warp are allocated in these units
    warp_size: int = 32


def _limits(arch: str, optin_kib: int, sm_kib: int, threads_sm: int, blocks_sm: int) -> ArchLimits:
    return ArchLimits(arch, max_threads_per_block=1024, max_registers_per_thread=255,
                      max_registers_per_block=64 * KIB, registers_per_sm=64 * KIB,
                      max_static_smem_per_block=48 * KIB,
                      max_smem_per_block_optin=optin_kib * KIB, smem_per_sm=sm_kib * KIB,
                      max_threads_per_sm=threads_sm, max_blocks_per_sm=blocks_sm)


LIMITS: dict[str, ArchLimits] = {
    "sm_70": _limits("sm_70", 96, 96, 2048, 32),
    "sm_75": _limits("sm_75", 64, 64, 1024, 16),
    "sm_80": _limits("sm_80", 163, 164, 2048, 32),
    "sm_86": _limits("sm_86", 99, 100, 1536, 16),
    "sm_89": _limits("sm_89", 99, 100, 1536, 24),
    "sm_90": _limits("sm_90", 227, 228, 2048, 32),
}


# SMs of the smallest data-centre GPU of each architecture (NVIDIA datasheets): V100 80, T4 40,
# A100 108, A10 72, L4 58, H100 SXM 132. A grid megakernel launches one block per SM, which
# every GPU of the architecture with at least that many SMs runs co-resident whenever one block
# fits an SM (the per-block limits `violations` checks); a GPU with fewer SMs refuses the
# cooperative launch (sirius/runtime/gpu/device.py checks before launching).
SMS: dict[str, int] = {"sm_70": 80, "sm_75": 40, "sm_80": 108, "sm_86": 72, "sm_89": 58,
                       "sm_90": 132}


def coresident_blocks(arch: str) -> int:
    """The grid of a `grid` megakernel on `arch`: one block per SM (see SMS)."""
    limits_for(arch)  # an unknown architecture: the same error as every limit
    return SMS[arch]


# the per-SM schedulers (warp scheduler partitions), each with a quarter of the register file
SCHEDULERS_PER_SM = 4


def blocks_per_sm(res: KernelResources, threads: int, arch: str, dynamic_smem: int = 0) -> int:
    """How many blocks of `threads` threads of the kernel ptxas reported as `res` (registers,
    static shared memory; plus `dynamic_smem` bytes) are resident on one SM of `arch` (the
    CUDA occupancy rules: threads, blocks, registers per warp rounded to the allocation unit
    out of each scheduler's quarter of the register file, shared memory with the 1 KiB the
    runtime reserves per block from sm_80 on). 0 when one block does not fit."""
    lim = limits_for(arch)
    warps = max(1, -(-threads // lim.warp_size))
    fits = [lim.max_threads_per_sm // (warps * lim.warp_size), lim.max_blocks_per_sm]
    if res.registers:
        per_warp = -(-res.registers * lim.warp_size // lim.register_alloc_unit) \
            * lim.register_alloc_unit
        part = lim.registers_per_sm // SCHEDULERS_PER_SM
        fits.append(part // per_warp * SCHEDULERS_PER_SM // warps)
    smem = res.smem + dynamic_smem
    if smem:
        reserved = KIB if int(arch.removeprefix("sm_").rstrip("a")) >= 80 else 0
        fits.append(lim.smem_per_sm // (smem + reserved)
                    if smem <= lim.max_smem_per_block_optin else 0)
    return max(0, min(fits))


def coresident_grid(res: KernelResources, threads: int, arch: str,
                    dynamic_smem: int = 0) -> tuple[int, int]:
    """(blocks per SM, the grid) a cooperative megakernel may launch on every GPU of `arch`:
    the blocks one SM holds times the SMs of the smallest such GPU (`SMS`)."""
    per = blocks_per_sm(res, threads, arch, dynamic_smem)
    return per, per * coresident_blocks(arch)


class ResourceLimitError(SiriusError):
    """A kernel spills or needs more of a resource than the architecture has."""


def limits_for(arch: str) -> ArchLimits:
    try:
        return LIMITS[arch]
    except KeyError:
        raise SiriusError(f"no resource limits known for {arch} "
                          f"(known: {', '.join(LIMITS)})") from None


def registers_per_block(registers: int, threads: int, lim: ArchLimits) -> int:
    """Registers a block really occupies: per warp, rounded up to the allocation unit."""
    per_warp = registers * lim.warp_size
    per_warp = -(-per_warp // lim.register_alloc_unit) * lim.register_alloc_unit
    warps = -(-threads // lim.warp_size)
    return warps * per_warp


def violations(res: KernelResources, arch: str, block_threads: int | None = None,
               dynamic_smem: int = 0) -> list[str]:
    """Every limit `res` breaks on `arch` for a launch of `block_threads` threads per block with
    `dynamic_smem` bytes of dynamic shared memory (both optional), as sentences."""
    lim = limits_for(arch)
    out: list[str] = []
    k = res.name
    if res.spill_stores or res.spill_loads:
        out.append(f"kernel {k} spills registers on {arch} ({res.spill_stores} bytes of spill "
                   f"stores, {res.spill_loads} bytes of spill loads)")
    if res.registers > lim.max_registers_per_thread:
        out.append(f"kernel {k} uses {res.registers} registers per thread; {arch} allows "
                   f"{lim.max_registers_per_thread}")
    if res.smem > lim.max_static_smem_per_block:
        out.append(f"kernel {k} has {res.smem} bytes of static shared memory; {arch} allows "
                   f"{lim.max_static_smem_per_block} per block")
    if res.smem + dynamic_smem > lim.max_smem_per_block_optin:
        out.append(f"kernel {k} needs {res.smem + dynamic_smem} bytes of shared memory "
                   f"({res.smem} static + {dynamic_smem} dynamic); {arch} allows "
                   f"{lim.max_smem_per_block_optin} per block")
    if block_threads is not None:
        if block_threads > lim.max_threads_per_block:
            out.append(f"kernel {k} is launched with {block_threads} threads per block; {arch} "
                       f"allows {lim.max_threads_per_block}")
        regs = registers_per_block(res.registers, block_threads, lim)
        if regs > lim.max_registers_per_block:
            out.append(f"kernel {k} needs {regs} registers per block ({res.registers} per "
                       f"thread x {block_threads} threads); {arch} allows "
                       f"{lim.max_registers_per_block}")
    return out


def check(res: KernelResources, arch: str, block_threads: int | None = None,
          dynamic_smem: int = 0) -> None:
    """Raise `ResourceLimitError` naming the kernel and every limit it breaks."""
    bad = violations(res, arch, block_threads, dynamic_smem)
    if bad:
        raise ResourceLimitError(bad[0], notes=tuple(bad[1:]))
