"""`CpuDevice`: device memory in private mappings, kernels JIT-compiled for the host CPU.

Allocations (memory.py) have red zones on both sides (filled with 0xCD) and no-access regions
beyond them, so an access a little past the end of a buffer lands in no allocation and
`check_bounds` reports it, and one further away faults instead of corrupting anything. Launches
go to the C runtime (sirius_rt.c) through ctypes, which releases the GIL while kernels run; a
signal a kernel raises (SIGSEGV, SIGFPE, ...) comes back as a `KernelFault`. Every run starts
from fresh device state: `load_module` restores the module's globals to their initializers.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import os
import signal
import time
from collections.abc import Callable, Sequence

import numpy as np

from sirius.analysis.irview import build_view
from sirius.diagnostics import Location, warn
from sirius.runtime.cpu import counters, monitor, native
from sirius.runtime.cpu.helperexec import Fault, Memory
from sirius.runtime.cpu.jit import JitModule, count_from_env
from sirius.runtime.cpu.memory import DeviceMemory, Region, nearest
from sirius.runtime.device import KernelFault, LaunchStats, Module, TraceChunk

_CTYPES = {"i1": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
           "i32": ctypes.c_int32, "i64": ctypes.c_int64, "float": ctypes.c_float,
           "double": ctypes.c_double, "ptr": ctypes.c_uint64}
_KIND = {0: "load", 1: "store", 2: "atomic access"}
TRACE_DTYPE = np.dtype([("block", "<u4"), ("thread", "<u4"), ("addr", "<u8"), ("size", "<u4"),
                        ("kind", "<u4")])

# by IR hash, instrumentation, loops, LLVM speed level, FLOP counters
_MODULES: dict[tuple[str, bool, bool, int, bool], JitModule] = {}

# A program that allocates less device memory than SMALL_PROGRAM_BYTES runs for a short time:
# its module is compiled with LLVM's O1 pipeline, which compiles faster than O2 (the fused TVM
# bert_qkv, bounds-checked: 2.6-2.7 s against 4.3-5.5 s; a cold verify of 10.1 s becomes
# 6.2 s) and runs 3-10% slower (scripts/bench_executor.py: tiled matmul 42.0 vs 38.6 ms, the
# 1M-thread elementwise kernel 13.1 vs 12.7 ms). One under TINY_PROGRAM_BYTES gets no IR passes
# and the code generator's fast instruction selection (O0): its runs take milliseconds, its
# compile most of a verify (the 100 random programs of the test suite, all under 64 KiB: 20%
# less CPU for fuse + verify than at O1). Larger programs, and those whose size is not known,
# get O2 (docs/runtime.md, "Compile levels").
SMALL_PROGRAM_BYTES = 512 * 1024
TINY_PROGRAM_BYTES = 64 * 1024


def jit_speed(data_bytes: int | None) -> int:
    """LLVM's speed level for a program that allocates `data_bytes` of device memory: 0 for a
    tiny program, 1 for a small one (a short run: compile time dominates), else 2;
    $SIRIUS_JIT_SPEED (0, 1 or 2) sets it for every program."""
    env = os.environ.get("SIRIUS_JIT_SPEED", "")
    if env in ("0", "1", "2"):
        return int(env)
    if data_bytes is None or data_bytes >= SMALL_PROGRAM_BYTES:
        return 2
    return 0 if data_bytes < TINY_PROGRAM_BYTES else 1


def default_jobs() -> int:
    """Worker threads of a forward-order launch when none are asked for: $SIRIUS_JOBS, else one
    per core. (The test suite sets SIRIUS_JOBS=1 in its pytest-xdist workers: the workers
    already use every core, and each launch worker JIT-compiles the module once more.)"""
    n = count_from_env("SIRIUS_JOBS", "worker")
    return n if n is not None else os.cpu_count() or 1


class CpuDevice:
    name = "cpu"

    def __init__(self, order: str = "forward", seed: int = 0, jobs: int | None = None,
                 check_bounds: bool = False, trace: bool = False, stack_kib: int = 256,
                 progress: bool | Callable[[str, int], monitor.Progress] = True,
                 loops: bool = True, count_flops: bool = False):
        kind = order.split(":", 1)[0]
        if kind not in native.ORDERS:
            raise ValueError(f"unknown order {order!r} (forward, reverse or random:SEED)")
        self.order = order
        self.order_code = native.ORDERS[kind]
        self.order_seed = int(order.split(":", 1)[1]) if ":" in order else seed
        # Only the forward order may spread blocks over cores: the others name one schedule.
        self.jobs = jobs or (default_jobs() if kind == "forward" else 1)
        self.check_bounds = check_bounds
        self.trace = trace
        self.stack_bytes = stack_kib * 1024
        # the progress of long launches: on stderr (True), not shown (False), or a factory
        # (kernel, blocks) -> monitor.Progress
        self.progress = progress
        # kernels whose only cooperation is __syncthreads run as work-item loops (wiloop.py);
        # False: on fibers, as every barrier kernel did before (same results and counters)
        self.loops = loops
        # modules count FLOPs per precision too (LaunchStats.flops; flops.py): sirius tune
        self.count_flops = count_flops
        self.traces: list[TraceChunk] = []
        self.memory = DeviceMemory()
        self._lib = native.library()
        self._launches = 0
        self._tables: tuple | None = None  # (key, ctypes arrays of the launch descriptor)
        # the flags and tables of `counters` megakernels, per (module, kernel), for a run
        self._counter_memory: dict[tuple[int, str], Memory] = {}

    # memory ----------------------------------------------------------------------------------
    def alloc(self, nbytes: int, label: str = "") -> int:
        return self.memory.alloc(nbytes, label)

    def free(self, address: int) -> None:
        self.memory.free(address)

    def view(self, address: int, nbytes: int) -> np.ndarray:
        """A writable byte view of device memory (must lie inside one allocation)."""
        return self.memory.view(address, nbytes)

    def locate(self, address: int) -> tuple[int, int]:
        """(allocation base, offset) of an address inside an allocation."""
        return self.memory.locate(address)

    def label(self, base: int) -> str:
        return self.memory.allocs[base].label

    def copy_to_device(self, address: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self.view(address, b.size)[:] = b

    def copy_from_device(self, address: int, nbytes: int) -> np.ndarray:
        return self.view(address, nbytes).copy()

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        self.view(dst, nbytes)[:] = self.view(src, nbytes).copy()

    def memset(self, address: int, value: int, nbytes: int) -> None:
        self.view(address, nbytes)[:] = value & 0xFF

    def copy_to_symbol(self, module: Module, name: str, offset: int, data: np.ndarray) -> None:
        """Host bytes into the module's variable `name` (IR name) at byte `offset`."""
        jm: JitModule = module.handle
        jm.write_global(name, offset, np.ascontiguousarray(data).view(np.uint8).tobytes())

    def copy_from_symbol(self, module: Module, name: str, offset: int,
                         nbytes: int) -> np.ndarray:
        jm: JitModule = module.handle
        return np.frombuffer(jm.read_global(name, offset, nbytes), dtype=np.uint8).copy()

    def synchronize(self) -> None:
        pass

    def timer(self) -> float:
        return time.perf_counter()

    # modules and launches ------------------------------------------------------------------
    def load_module(self, program, data_bytes: int | None = None) -> Module:
        """The device module of `program`, compiled for this device (cached); `data_bytes`:
        the device memory the program allocates, when known (a small program is compiled
        for a short run, see `jit_speed`)."""
        speed = jit_speed(data_bytes)
        key = (hashlib.sha256(program.device_ir.encode()).hexdigest(), self.check_bounds or
               self.trace, self.loops, speed, self.count_flops)
        jm = _MODULES.get(key)
        if jm is None:
            jm = JitModule(lambda: build_view(program.device_module), instrument=key[1],
                           text=program.device_ir,
                           source=", ".join(str(f) for f in program.files), loops=self.loops,
                           speed=speed, count_flops=self.count_flops)
            _MODULES[key] = jm
        jm.reset()  # a new run: the module's globals start from their initializers
        self._counter_memory = {k: v for k, v in self._counter_memory.items() if k[0] != id(jm)}
        return Module(jm, {k: k for k in jm.host.kernels})

    def launch(self, module: Module, kernel: str, grid, block, smem: int, args: list,
               loc: Location | None = None, name: str | None = None,
               blocks: Sequence[int] | None = None) -> LaunchStats:
        """One launch; `blocks`: only these blocks (linear ids), in this order (a `counters`
        megakernel's segment runs some of its blocks at a time)."""
        jm: JitModule = module.handle
        entry = jm.host.kernels.get(kernel)
        shown = name or kernel
        if entry is None:
            raise KernelFault(f"kernel {shown} is not in the loaded module", loc)
        if entry.rejected:
            raise KernelFault(f"the CPU executor cannot run kernel {shown}: it {entry.rejected}",
                              loc)
        if entry.segments:  # a megakernel: a grid barrier between segments
            return self._segments(module, entry, shown, grid, block, smem, args, loc)
        if smem > jm.host.smem_bytes - jm.host.smem_static:
            raise KernelFault(f"kernel {shown} asks for {smem} bytes of dynamic shared memory; "
                              f"at most {jm.host.smem_bytes - jm.host.smem_static} are possible",
                              loc)
        if len(args) != len(entry.params):
            raise KernelFault(f"kernel {shown} takes {len(entry.params)} arguments, "
                              f"{len(args)} given", loc)
        nthreads = block[0] * block[1] * block[2]
        if nthreads > 1024 or nthreads <= 0 or min(grid) <= 0 or grid[0] >= 1 << 31 \
                or max(grid[1], grid[2]) > 65535:
            raise KernelFault(f"kernel {shown}: invalid launch configuration grid {tuple(grid)} "
                              f"block {tuple(block)}", loc)
        # the device globals of a module live in each worker's copy: one worker then
        # Workers pay for themselves only on big grids (starting a thread costs ~50 us).
        nblocks = grid[0] * grid[1] * grid[2] if blocks is None else len(blocks)
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
        d.use_fibers = native.MODE_LOOPS if entry.loops else \
            native.MODE_FIBERS if entry.fibers else native.MODE_FAST
        d.frame_bytes = entry.frame_bytes
        d.ctx = (ctypes.c_void_p * nw)(*[e.ctx for e in engines])
        d.fn = (ctypes.c_void_p * nw)(*[e.thread_fns[kernel] for e in engines])
        d.args = argv
        d.grid[:] = list(grid)
        d.block[:] = list(block)
        d.order = self.order_code
        if blocks is not None:
            keep = (ctypes.c_uint32 * max(1, len(blocks)))(*blocks)
            d.block_list = keep
            d.nblock_list = len(blocks)
        d.seed = (self.order_seed * 1_000_003 + self._launches) & (2**64 - 1)
        d.check_bounds = int(self.check_bounds)
        d.trace = int(self.trace)
        regions, tables = self._launch_tables(jm, engines)
        d.nallocs, d.alloc_lo, d.alloc_hi = len(regions), tables[0], tables[1]
        if not self.check_bounds:
            d.nredzones, d.rz_lo, d.rz_hi, d.rz_dirty = tables[2:]
        d.stack_bytes = self.stack_bytes
        tp = (ctypes.c_void_p * nw)()
        tl = (ctypes.c_uint64 * nw)()
        d.trace_ptr = tp
        d.trace_len = tl
        ranges = 16 * max(1, len(jm.host.sites))
        for e in engines:  # the smem bounds the rewritten code classifies addresses with
            ctypes.c_uint64.from_address(e.ctx + native.CTX_SMEM).value = e.smem
            ctypes.c_uint64.from_address(e.ctx + native.CTX_SMEM_SIZE).value = \
                jm.host.smem_static + smem
            # the bounds checker's per-site ranges hold for one launch's allocations
            ctypes.c_uint64.from_address(e.ctx + native.CTX_SITE_RANGE).value = e.site_range
            if e.site_range:
                ctypes.memset(e.site_range, 0, ranges)
        self._launches += 1
        rc, seconds = self._run(d, nw, nblocks, nthreads, entry.fibers and not entry.loops,
                                shown, loc)
        if rc != 0:
            what = "frames" if entry.loops else "fiber stacks"
            raise KernelFault(f"kernel {shown}: the runtime could not start the launch "
                              f"(code {rc}; {what} for {nthreads} threads?)", loc)
        if self.trace:
            self._collect_trace(tp, tl, nw, engines, jm, smem)
        if d.fault:
            raise self._fault(d, jm, shown, loc, regions)
        if d.cancel:  # stopped by SIGINT, whose handler did not raise
            raise KeyboardInterrupt
        if d.rz_found:
            self._redzones(d, shown, loc)
        c = list(d.counters)
        return LaunchStats(shown, tuple(grid), tuple(block), smem, c[0], c[1], c[2], c[3], c[4],
                           c[5], seconds,
                           "loops" if entry.loops else "fibers" if entry.fibers else "fast",
                           flops=tuple(d.flops))

    def _segments(self, module: Module, entry, shown: str, grid, block, smem: int, args: list,
                  loc: Location | None) -> LaunchStats:
        """A megakernel's launch: each segment over every block (in this device's block order)
        before the next, which is what the grid barrier between them guarantees; one launch's
        counts, its grid barriers among its barriers (one per block and grid barrier)."""
        nblocks = grid[0] * grid[1] * grid[2]
        # a device loop's segments take the iteration after the kernel's arguments; its
        # iterations run in order, a grid barrier between two
        looped = bool(entry.segments) and len(
            module.handle.host.kernels[entry.segments[0]].params) == len(args) + 1

        def part(k: int, it: int, blocks=None) -> LaunchStats:
            return self.launch(module, entry.segments[k], grid, block, smem,
                               [*args, it] if looped else args, loc,
                               name=f"{shown} (segment {k}"
                                    f"{f', iteration {it}' if looped else ''})", blocks=blocks)

        if entry.counters is None:  # grid barriers
            parts = [part(k, it) for it in range(entry.trips)
                     for k in range(len(entry.segments))]
            of = [k for _ in range(entry.trips) for k in range(len(entry.segments))]
            extra, checks = (len(parts) - 1) * nblocks, 0
        else:  # dependence counters: each block as far as its helpers let it (counters.py)
            prog = entry.counters
            nseg = len(entry.segments)
            key = (id(module.handle), entry.name)
            if key not in self._counter_memory:  # its flags live as long as the run
                self._counter_memory[key] = Memory(prog.fresh_memory())
            parts, of = [], []

            def run_step(s: int, bs: list[int]) -> None:
                parts.append(part(s % nseg, s // nseg, bs))
                of.append(s % nseg)

            try:
                checks = counters.run(prog, entry.trips, nblocks, tuple(block),
                                      self.order_code,
                                      self.order_seed * 1_000_003 + self._launches,
                                      self._counter_memory[key], run_step)
            except (counters.Deadlock, Fault) as e:
                raise KernelFault(f"kernel {shown}: {e}", loc) from None
            # a block barrier in each signal (every segment) and each wait, every iteration
            nwaits = sum(w is not None for w in prog.waits)
            extra = (nseg + nwaits) * entry.trips * nblocks
        counts = [sum(getattr(p, f) for p in parts) for f in (
            "instructions", "global_load_bytes", "global_store_bytes", "shared_load_bytes",
            "shared_store_bytes", "barriers")]
        counts[-1] += extra
        modes = {p.mode for p in parts}
        if self.trace and parts:  # one launch, one trace: the parts' records together
            chunks = self.traces[-len(parts):]
            del self.traces[-len(parts):]
            self.traces.append(dataclasses.replace(
                chunks[0], records=np.concatenate([c.records for c in chunks])))
        per = [[0, 0, 0] for _ in entry.segments]
        per_flops = [[0, 0, 0] for _ in entry.segments]
        for k, p in zip(of, parts, strict=True):
            per[k][0] += p.instructions
            per[k][1] += p.global_load_bytes
            per[k][2] += p.global_store_bytes
            per_flops[k] = [a + b for a, b in zip(per_flops[k], p.flops, strict=True)]
        return LaunchStats(shown, tuple(grid), tuple(block), smem, *counts,
                           sum(p.seconds for p in parts),
                           modes.pop() if len(modes) == 1 else "+".join(sorted(modes)),
                           waits=checks, sync="grid" if entry.counters is None else "counters",
                           segments=tuple(tuple(x) for x in per),
                           flops=tuple(sum(f[i] for f in per_flops) for i in range(3)),
                           segment_flops=tuple(tuple(f) for f in per_flops))

    def _run(self, d, nw: int, nblocks: int, nthreads: int, fibers: bool, kernel: str,
             loc: Location | None) -> tuple[int, float]:
        """The launch itself; a long one with a warning first and progress while it runs."""
        def call() -> int:
            return self._lib.sirius_launch(ctypes.byref(d))

        t0 = time.perf_counter()
        if nblocks * nthreads < monitor.MONITORED_THREADS:
            rc = call()
        else:
            d.done = (ctypes.c_uint64 * (8 * nw))()
            est = monitor.estimate_seconds(nblocks, nthreads, nw, fibers)
            if est >= monitor.WARN_SECONDS:
                warn("long-launch", f"kernel {kernel} launches {nblocks:,} blocks of {nthreads} "
                     f"threads; on the CPU executor that takes {monitor.duration(est)} at the "
                     "very least (Ctrl-C stops it)", loc)
            make = self.progress if callable(self.progress) else \
                (monitor.Progress if self.progress else None)
            show = make(kernel, nblocks) if make is not None else None
            rc = monitor.run_monitored(call, d, nw, show)
        return rc, time.perf_counter() - t0

    def _launch_tables(self, jm: JitModule, engines) -> tuple[list[Region], tuple]:
        """The regions kernels may access (allocations and every engine's module globals) and
        the descriptor arrays made from them, cached until an allocation changes."""
        key = (self.memory.generation, id(jm), len(engines))
        if self._tables is not None and self._tables[0] == key:
            return self._tables[1], self._tables[2]
        regions = self.memory.regions()
        for e in engines:
            regions += [Region(a, a + g.bytes, g.label)
                        for a, g in zip(e.globals, jm.host.globals, strict=True)]
        regions.sort(key=lambda r: r.lo)
        n = max(1, len(regions))
        lo = (ctypes.c_uint64 * n)(*[r.lo for r in regions])
        hi = (ctypes.c_uint64 * n)(*[r.hi for r in regions])
        clean = [b for b in self.memory.sorted if not self.memory.allocs[b].redzone_dirty]
        rz_lo = (ctypes.c_uint64 * max(1, len(clean)))(*clean)
        rz_hi = (ctypes.c_uint64 * max(1, len(clean)))(
            *[b + self.memory.allocs[b].nbytes for b in clean])
        rz_dirty = (ctypes.c_uint8 * max(1, len(clean)))()
        tables = (lo, hi, len(clean), rz_lo, rz_hi, rz_dirty)
        self._tables = (key, regions, tables)
        return regions, tables

    def _redzones(self, d, kernel: str, loc: Location | None) -> None:
        """Warn about a store past a buffer that an unchecked launch left in its red zones."""
        for i in range(d.nredzones):
            if d.rz_dirty[i]:
                a = self.memory.allocs[d.rz_lo[i]]
                a.redzone_dirty = True  # reported once
                self._tables = None
                warn("out-of-bounds", f"kernel {kernel} wrote just outside {a.label or 'a buffer'}"
                     f" ({a.nbytes} bytes): the red zone around it changed; re-run with "
                     "--check-bounds to find the access", loc)

    def _collect_trace(self, tp, tl, nw: int, engines, jm: JitModule, smem: int) -> None:
        parts = []
        for i in range(nw):
            n = tl[i]
            if n:
                buf = (ctypes.c_char * (n * TRACE_DTYPE.itemsize)).from_address(tp[i])
                parts.append(np.frombuffer(bytes(buf), dtype=TRACE_DTYPE))
        recs = np.concatenate(parts) if parts else np.zeros(0, TRACE_DTYPE)
        # every worker has its own shared memory; addresses in any of them map to offsets
        gs = tuple((a, g.bytes, i) for e in engines
                   for i, (a, g) in enumerate(zip(e.globals, jm.host.globals, strict=True)))
        self.traces.append(TraceChunk(recs, tuple(e.smem for e in engines),
                                      jm.host.smem_static + smem, jm.host.smem_static,
                                      jm.host.shared, gs, tuple(g.name for g in jm.host.globals)))

    def _fault(self, d, jm: JitModule, kernel: str, loc: Location | None,
               regions: list[Region]) -> KernelFault:
        sites = jm.host.sites
        site_loc = sites[d.fault_site] if d.fault_site < len(sites) else None
        blk = tuple(d.fault_block)
        thr = tuple(d.fault_thread)
        if d.fault == native.FAULT_SIGNAL:
            return self._signal_fault(d, kernel, loc, regions, blk, thr)
        if d.fault == native.FAULT_BOUNDS:
            addr = d.fault_addr
            msg = (f"out-of-bounds {_KIND.get(d.fault_kind, 'access')} of {d.fault_size} bytes "
                   f"at address 0x{addr:x} in kernel {kernel}, block {blk}, thread {thr}")
            note = nearest(regions, addr)
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

    def _signal_fault(self, d, kernel: str, loc: Location | None, regions: list[Region],
                      blk: tuple, thr: tuple) -> KernelFault:
        """A SIGSEGV, SIGBUS, SIGFPE or SIGILL raised while the kernel ran."""
        where = f"in kernel {kernel}, block {blk}, thread {thr}"
        addr = d.fault_addr
        notes: list[str] = []
        sig = d.fault_signal
        if sig == signal.SIGFPE:
            msg = (f"integer division by zero (or overflow) {where}; a GPU gives an undefined "
                   "result there, the CPU traps")
        elif sig == signal.SIGILL:
            msg = (f"trap {where}: the kernel called __trap() or reached code the compiler "
                   "marked unreachable")
        elif d.fault_stack:
            room = f"each thread has {self.stack_bytes >> 10} KiB of stack" \
                if d.use_fibers == native.MODE_FIBERS \
                else "threads run on the worker's stack"
            msg = (f"stack overflow {where} ({room}: deep or unbounded recursion, or large "
                   "local arrays?)")
        else:
            what = "store to" if d.fault_kind == 1 else "access at"
            msg = f"invalid memory {what} address 0x{addr:x} {where}"
            note = nearest(regions, addr)
            if note:
                notes.append(note)
        if self.check_bounds:
            notes.append("the bounds checker did not see this access: it is not a load or "
                         "store of the kernel's own code (a library call, the stack)")
        elif not d.fault_stack and sig in (signal.SIGSEGV, signal.SIGBUS):
            notes.append("re-run with --check-bounds to find the access (its source line and "
                         "the buffer)")
        return KernelFault(msg, loc, notes=tuple(notes))
