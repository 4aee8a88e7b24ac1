"""`CpuDevice`: device memory in host arrays, kernels JIT-compiled for the host CPU.

Allocations are numpy byte arrays with red zones on both sides (filled with 0xCD), so an access a
little past the end of a buffer lands in no allocation and `check_bounds` reports it. Launches go
to the C runtime (sirius_rt.c) through ctypes, which releases the GIL while kernels run.
"""

from __future__ import annotations

import bisect
import ctypes
import hashlib
import os
import time

import numpy as np

from sirius.analysis.irview import build_view
from sirius.diagnostics import Location
from sirius.runtime.cpu import native
from sirius.runtime.cpu.jit import JitModule
from sirius.runtime.device import KernelFault, LaunchStats, Module, TraceChunk

REDZONE = 256
_CTYPES = {"i1": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
           "i32": ctypes.c_int32, "i64": ctypes.c_int64, "float": ctypes.c_float,
           "double": ctypes.c_double, "ptr": ctypes.c_uint64}
_KIND = {0: "load", 1: "store", 2: "atomic access"}
TRACE_DTYPE = np.dtype([("block", "<u4"), ("thread", "<u4"), ("addr", "<u8"), ("size", "<u4"),
                        ("kind", "<u4")])

_MODULES: dict[tuple[str, bool], JitModule] = {}  # compiled modules, by IR hash and mode


class CpuDevice:
    name = "cpu"

    def __init__(self, order: str = "forward", seed: int = 0, jobs: int | None = None,
                 check_bounds: bool = False, trace: bool = False, stack_kib: int = 256):
        kind = order.split(":", 1)[0]
        if kind not in native.ORDERS:
            raise ValueError(f"unknown order {order!r} (forward, reverse or random:SEED)")
        self.order = order
        self.order_code = native.ORDERS[kind]
        self.order_seed = int(order.split(":", 1)[1]) if ":" in order else seed
        # Only the forward order may spread blocks over cores: the others name one schedule.
        self.jobs = jobs or (os.cpu_count() or 1 if kind == "forward" else 1)
        self.check_bounds = check_bounds
        self.trace = trace
        self.stack_bytes = stack_kib * 1024
        self.traces: list[TraceChunk] = []
        self._allocs: dict[int, tuple[np.ndarray, int, str]] = {}  # address -> (array, n, label)
        self._sorted: list[int] = []
        self._lib = native.library()
        self._launches = 0

    # memory ----------------------------------------------------------------------------------
    def alloc(self, nbytes: int, label: str = "") -> int:
        raw = np.full(nbytes + 2 * REDZONE + 64, 0xCD, dtype=np.uint8)
        base = raw.ctypes.data + REDZONE
        base += -base % 64
        self._allocs[base] = (raw, nbytes, label)
        bisect.insort(self._sorted, base)
        return base

    def free(self, address: int) -> None:
        if address not in self._allocs:
            raise ValueError(f"free of 0x{address:x}, which is not an allocation")
        del self._allocs[address]
        self._sorted.remove(address)

    def view(self, address: int, nbytes: int) -> np.ndarray:
        """A writable byte view of device memory (must lie inside one allocation)."""
        base, off = self.locate(address)
        raw, n, label = self._allocs[base]
        if off + nbytes > n:
            raise ValueError(f"{nbytes} bytes at offset {off} overrun {label or 'a buffer'} "
                             f"({n} bytes)")
        start = base - raw.ctypes.data + off
        return raw[start:start + nbytes]

    def locate(self, address: int) -> tuple[int, int]:
        """(allocation base, offset) of an address inside an allocation."""
        i = bisect.bisect_right(self._sorted, address) - 1
        if i < 0 or address > self._sorted[i] + self._allocs[self._sorted[i]][1]:
            raise ValueError(f"0x{address:x} is not inside any allocation")
        return self._sorted[i], address - self._sorted[i]

    def label(self, base: int) -> str:
        return self._allocs[base][2]

    def copy_to_device(self, address: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self.view(address, b.size)[:] = b

    def copy_from_device(self, address: int, nbytes: int) -> np.ndarray:
        return self.view(address, nbytes).copy()

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        self.view(dst, nbytes)[:] = self.view(src, nbytes).copy()

    def memset(self, address: int, value: int, nbytes: int) -> None:
        self.view(address, nbytes)[:] = value & 0xFF

    def synchronize(self) -> None:
        pass

    def timer(self) -> float:
        return time.perf_counter()

    # modules and launches ------------------------------------------------------------------
    def load_module(self, program) -> Module:
        key = (hashlib.sha256(program.device_ir.encode()).hexdigest(), self.check_bounds or
               self.trace)
        jm = _MODULES.get(key)
        if jm is None:
            jm = JitModule(build_view(program.device_module), instrument=key[1],
                           source=", ".join(str(f) for f in program.files))
            _MODULES[key] = jm
        return Module(jm, {k: k for k in jm.host.kernels})

    def launch(self, module: Module, kernel: str, grid, block, smem: int, args: list,
               loc: Location | None = None, name: str | None = None) -> LaunchStats:
        jm: JitModule = module.handle
        entry = jm.host.kernels.get(kernel)
        shown = name or kernel
        if entry is None:
            raise KernelFault(f"kernel {shown} is not in the loaded module", loc)
        if entry.rejected:
            raise KernelFault(f"the CPU executor cannot run kernel {shown}: it {entry.rejected}",
                              loc)
        if smem > jm.host.smem_bytes - jm.host.smem_static:
            raise KernelFault(f"kernel {shown} asks for {smem} bytes of dynamic shared memory; "
                              f"at most {jm.host.smem_bytes - jm.host.smem_static} are possible",
                              loc)
        if len(args) != len(entry.params):
            raise KernelFault(f"kernel {shown} takes {len(entry.params)} arguments, "
                              f"{len(args)} given", loc)
        nthreads = block[0] * block[1] * block[2]
        if nthreads > 1024 or nthreads <= 0 or min(grid) <= 0:
            raise KernelFault(f"kernel {shown}: invalid launch configuration grid {tuple(grid)} "
                              f"block {tuple(block)}", loc)
        # the device globals of a module live in each worker's copy: one worker then
        # Workers pay for themselves only on big grids (starting a thread costs ~50 us).
        nblocks = grid[0] * grid[1] * grid[2]
        nw = 1 if jm.host.device_globals else \
            max(1, min(self.jobs, nblocks, nblocks * nthreads // 16384))
        engines = jm.engines(nw)
        values = []
        for ty, a in zip(entry.params, args, strict=True):
            ct = _CTYPES.get(ty)
            if ct is None:
                raise KernelFault(f"kernel {shown}: parameters of type {ty} are not supported "
                                  "by the CPU executor", loc)
            if ty in ("float", "double"):
                values.append(ct(float(a)))
            else:
                bits = 8 * ctypes.sizeof(ct)
                v = int(a) & ((1 << bits) - 1)
                if ty != "ptr" and v >= 1 << (bits - 1):
                    v -= 1 << bits
                values.append(ct(v))
        argv = (ctypes.c_void_p * max(1, len(values)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        d = native.LaunchDesc()
        d.nworkers = nw
        d.use_fibers = int(entry.fibers)
        d.ctx = (ctypes.c_void_p * nw)(*[e.ctx for e in engines])
        d.fn = (ctypes.c_void_p * nw)(*[e.thread_fns[kernel] for e in engines])
        d.args = argv
        d.grid[:] = list(grid)
        d.block[:] = list(block)
        d.order = self.order_code
        d.seed = (self.order_seed * 1_000_003 + self._launches) & (2**64 - 1)
        d.check_bounds = int(self.check_bounds)
        d.trace = int(self.trace)
        lo = list(self._sorted)
        hi = [b + self._allocs[b][1] for b in self._sorted]
        d.nallocs = len(lo)
        d.alloc_lo = (ctypes.c_uint64 * max(1, len(lo)))(*lo)
        d.alloc_hi = (ctypes.c_uint64 * max(1, len(hi)))(*hi)
        d.stack_bytes = self.stack_bytes
        tp = (ctypes.c_void_p * nw)()
        tl = (ctypes.c_uint64 * nw)()
        d.trace_ptr = tp
        d.trace_len = tl
        for e in engines:  # the smem bounds the rewritten code classifies addresses with
            ctypes.c_uint64.from_address(e.ctx + native.CTX_SMEM).value = e.smem
            ctypes.c_uint64.from_address(e.ctx + native.CTX_SMEM_SIZE).value = \
                jm.host.smem_static + smem
        self._launches += 1
        t0 = time.perf_counter()
        rc = self._lib.sirius_launch(ctypes.byref(d))
        seconds = time.perf_counter() - t0
        if rc != 0:
            raise KernelFault(f"kernel {shown}: the runtime could not start the launch "
                              f"(code {rc}; fiber stacks for {nthreads} threads?)", loc)
        if self.trace:
            self._collect_trace(tp, tl, nw, engines, jm, smem)
        if d.fault:
            raise self._fault(d, jm, shown, loc)
        c = list(d.counters)
        return LaunchStats(shown, tuple(grid), tuple(block), smem, c[0], c[1], c[2], c[3], c[4],
                           c[5], seconds, "fibers" if entry.fibers else "fast")

    def _collect_trace(self, tp, tl, nw: int, engines, jm: JitModule, smem: int) -> None:
        parts = []
        for i in range(nw):
            n = tl[i]
            if n:
                buf = (ctypes.c_char * (n * TRACE_DTYPE.itemsize)).from_address(tp[i])
                parts.append(np.frombuffer(bytes(buf), dtype=TRACE_DTYPE))
        recs = np.concatenate(parts) if parts else np.zeros(0, TRACE_DTYPE)
        # every worker has its own shared memory; addresses in any of them map to offsets
        self.traces.append(TraceChunk(recs, tuple(e.smem for e in engines),
                                      jm.host.smem_static + smem, jm.host.smem_static,
                                      jm.host.shared))

    def _fault(self, d, jm: JitModule, kernel: str, loc: Location | None) -> KernelFault:
        sites = jm.host.sites
        site_loc = sites[d.fault_site] if d.fault_site < len(sites) else None
        blk = tuple(d.fault_block)
        thr = tuple(d.fault_thread)
        if d.fault == native.FAULT_BOUNDS:
            addr = d.fault_addr
            msg = (f"out-of-bounds {_KIND.get(d.fault_kind, 'access')} of {d.fault_size} bytes "
                   f"at address 0x{addr:x} in kernel {kernel}, block {blk}, thread {thr}")
            note = self._nearest(addr)
            return KernelFault(msg, site_loc or loc, notes=(note,) if note else ())
        where = f" at {site_loc}" if site_loc else ""
        if d.fault == native.FAULT_BARRIER:
            msg = (f"divergent barrier in kernel {kernel}, block {blk}: {d.fault_waiting} of "
                   f"{d.block[0] * d.block[1] * d.block[2]} threads wait at the barrier{where}; "
                   f"{d.fault_exited} exited without reaching it (first: thread {thr})")
        else:
            msg = (f"warp operation that cannot complete in kernel {kernel}, block {blk}: "
                   f"{d.fault_waiting} threads wait on it while thread {thr} does not reach it")
        return KernelFault(msg, site_loc or loc)

    def _nearest(self, addr: int) -> str | None:
        """Where a bad address lies relative to the closest allocation."""
        i = bisect.bisect_right(self._sorted, addr) - 1
        options = []
        if i >= 0:
            base = self._sorted[i]
            n, label = self._allocs[base][1], self._allocs[base][2]
            if addr >= base + n:
                options.append((addr - base - n, f"{addr - base - n} bytes past the end of "
                                                 f"{label or 'an allocation'} ({n} bytes)"))
        if i + 1 < len(self._sorted):
            base = self._sorted[i + 1]
            label = self._allocs[base][2]
            options.append((base - addr, f"{base - addr} bytes before the start of "
                                         f"{label or 'an allocation'}"))
        return min(options)[1] if options else None
