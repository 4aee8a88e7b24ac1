"""The cost model's inputs, measured on the CPU executor: per dynamic launch its exact
instruction and global-byte counts (`LaunchStats`), its FLOPs per precision, and the ptxas
registers and static shared memory of its kernel.

FLOPs are counted exactly in the same run: the executor adds, per basic block, the number of
instructions the block has, and with `count_flops` also the block's FLOPs per precision (an FMA
is 2, a vector operation counts its lanes, a libdevice math call 1: sirius/runtime/cpu/flops.py)
to three more counters. One run of the program gives every count; a program that moves at
most TRACE_LIMIT bytes runs once more, traced, for its exact footprints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sirius.analysis.host.model import BufferArg, DevRef, HostProgram, Launch, Loop, Op, Rotating
from sirius.backend.ptxas import KernelResources
from sirius.frontend import llvmctx
from sirius.runtime.cpu.flops import PRECISIONS
from sirius.tune.model import LaunchCounts, Segment


@dataclass(frozen=True)
class ProgramText:
    """What the interpreter needs to load a device module."""

    device_ir: str
    device_module: object
    files: tuple


def _program(ir: str, files) -> ProgramText:
    return ProgramText(ir, llvmctx.parse(ir), tuple(files))


def input_dtypes(original) -> dict[str, np.dtype]:
    """The buffer dtypes the original program's kernels give its buffers: fused programs run on
    the same data when they get these (as `sirius verify` does)."""
    from sirius.runtime.interpreter import HostInterpreter

    interp = HostInterpreter(original.host, {k.mangled: k for k in original.kernels}, None, None)
    return dict(interp.dtypes)


# Exact footprints need a traced run (one record per global *and shared* access): only when
# the program moves at most this many global + shared bytes in all. Otherwise the footprint is
# bounded by the buffers a launch receives (`buffer_bound`).
TRACE_LIMIT = 32 * 1024 * 1024


def _run(host: HostProgram, program, kernels, seed: int, dtypes, trace: bool = False,
         count_flops: bool = False):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    dev = CpuDevice(order="forward", seed=seed, jobs=1, trace=trace, count_flops=count_flops)
    return run_host_program(host, program, kernels, dev, seed=seed, dtypes=dtypes)


def launch_regions(host: HostProgram) -> list[int]:
    """For each static launch (HostProgram.launches() order) the index of its region: the
    planner's maximal runs of consecutive launches in one host body and one part (prepare or
    per-inference), in its order."""
    out: list[int] = []
    count = 0

    def body(ops: Sequence[Op]) -> None:
        nonlocal count
        run = 0
        last = None
        for op in ops:
            if isinstance(op, Launch):
                if run and last is not None and last.prepare != op.prepare:
                    count += 1  # the prepare part ends a region (planner.regions)
                    run = 0
                out.append(count)
                run += 1
                last = op
                continue
            if run:
                count += 1
                run = 0
            if isinstance(op, Loop):
                body(op.body)
        if run:
            count += 1

    body(host.ops)
    return out


def measure(host: HostProgram, ir: str, files, kernels, resources: dict[str, KernelResources],
            *, seed: int, dtypes, regions: bool = True,
            segment_work: dict[str, tuple[tuple[int, int] | None, ...]] | None = None,
            iterations: dict[str, int] | None = None) -> list[LaunchCounts]:
    """Run `host` with device module `ir` and return the model's inputs per dynamic launch;
    `segment_work`: per megakernel (its IR name), the blocks and threads each segment gives
    work to (`megakernel_segment_work`); `iterations`: per megakernel with a device loop, its
    trips (`megakernel_iterations`)."""
    base = _run(host, _program(ir, files), kernels, seed, dtypes, count_flops=True)
    flops = [_by_precision(r.stats.flops) for r in base.launches]
    seg_flops = [[_by_precision(f) for f in r.stats.segment_flops] or
                 [{} for _ in r.stats.segments] for r in base.launches]
    statics = host.launches()
    sizes = {b.name: b.bytes for b in host.buffers}
    feet = [buffer_bound(statics[r.launch_index], sizes) for r in base.launches]
    exact = False
    total = sum(r.stats.global_load_bytes + r.stats.global_store_bytes
                + r.stats.shared_load_bytes + r.stats.shared_store_bytes for r in base.launches)
    if total <= TRACE_LIMIT:
        traced = _run(host, _program(ir, files), kernels, seed, dtypes, trace=True)
        feet = [footprint(t.records) for t in traced.traces]
        exact = True
    region_of = launch_regions(host) if regions else [-1] * len(statics)
    segment_work = segment_work or {}
    out = []
    for rec, fl, sfl in zip(base.launches, flops, seg_flops, strict=True):
        s = rec.stats
        op = statics[rec.launch_index]
        r = resources.get(op.mangled)
        out.append(LaunchCounts(
            s.kernel, op.mangled, tuple(s.grid), tuple(s.block), s.smem, s.instructions,
            s.global_load_bytes + s.global_store_bytes, tuple(sorted(fl.items())),
            r.registers if r else None, r.smem if r else 0,
            s.shared_load_bytes + s.shared_store_bytes, s.barriers,
            region_of[rec.launch_index], feet[len(out)], exact, s.sync,
            tuple(Segment(ins, ld + st, tuple(sorted(f.items())), *(work or (None, None)))
                  for (ins, ld, st), f, work in zip(
                      s.segments, sfl,
                      segment_work.get(op.mangled, (None,) * len(s.segments)),
                      strict=True)),
            op.prepare, (iterations or {}).get(op.mangled, 1)))
    return out


def megakernel_iterations(megakernels) -> dict[str, int]:
    """Per megakernel with a device loop (FuseResult.megakernels), the loop's trips."""
    return {rec.kernel.name: rec.kernel.spec.device_loop.trips for rec in megakernels
            if rec.kernel is not None and rec.kernel.spec.device_loop is not None}


def megakernel_segment_work(megakernels) -> dict[str, tuple[tuple[int, int] | None, ...]]:
    """Per megakernel (FuseResult.megakernels), per segment: (blocks, threads) of its grid and
    block that get work: the most blocks one of the segment's members needs (every member runs
    over its own blocks from block 0) and the most threads one has (a member runs on its own
    block size); None where a member's need is not known (model.Segment)."""
    from math import prod

    out: dict[str, tuple[tuple[int, int] | None, ...]] = {}
    for rec in megakernels:
        k = rec.kernel
        if k is None:
            continue
        threads = prod(k.block)
        per: list[tuple[int, int] | None] = []
        for seg in k.spec.segments():
            ms = [k.spec.members[m] for m in seg]
            needs = [m.blocks_needed(threads) for m in ms]
            per.append(None if any(n is None for n in needs) else
                       (max(needs, default=1), min(threads, max(m.threads for m in ms))))
        out[k.name] = tuple(per)
    return out


def _by_precision(counts: Sequence[int]) -> dict[str, int]:
    """The executor's FLOP counters (PRECISIONS order) as {precision: FLOPs}, zeros left out."""
    return {p: n for p, n in zip(PRECISIONS, counts, strict=True) if n}


def buffer_bound(op: Launch, sizes: dict[str, int]) -> int:
    """An upper bound on a launch's footprint: every byte of every buffer it receives loaded
    once and stored once (2 x their sizes; both choices of a rotating address)."""
    names: set[str] = set()
    for a in op.args:
        if isinstance(a, BufferArg):
            refs = a.address.choices if isinstance(a.address, Rotating) else (a.address,)
            names |= {r.buffer for r in refs if isinstance(r, DevRef)}
    return 2 * sum(sizes.get(n, 0) for n in names)


def footprint(records: np.ndarray) -> int:
    """Distinct global bytes loaded plus distinct global bytes stored (an atomic both) of one
    launch's trace (`LaunchTrace.records`)."""
    g = records[records["space"] == 0]
    total = 0
    for kinds in ((0, 2), (1, 2)):
        sel = g[np.isin(g["kind"], kinds)]
        if sel.size == 0:
            continue
        key = (sel["buffer"].astype(np.int64) << 40) | sel["offset"].astype(np.int64)
        _, first = np.unique(key, return_index=True)
        total += int(sel["size"][first].astype(np.int64).sum())
    return total


def files_of(paths: Sequence[Path | str]) -> tuple[str, ...]:
    return tuple(str(p) for p in paths)
