"""The cost model's inputs, measured on the CPU executor: per dynamic launch its exact
instruction and global-byte counts (`LaunchStats`), its FLOPs per precision, and the ptxas
registers and static shared memory of its kernel.

FLOPs are counted exactly without changing the executor: the executor adds, per basic block,
the number of instructions the block has. A copy of the module in which every floating-point
operation of one precision is followed by one dead instruction per FLOP (`add i8 0, 0`: two
after an FMA, one per vector lane) is run on the same inputs; the difference in each launch's
instruction count is that launch's FLOPs. One extra run per precision the module uses; dead
instructions cost nothing at run time (the JIT removes them after counting).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sirius.analysis.host.model import BufferArg, DevRef, HostProgram, Launch, Loop, Op, Rotating
from sirius.backend.ptxas import KernelResources
from sirius.frontend import llvmctx
from sirius.tune.model import LaunchCounts, Segment

PRECISIONS = {"half": "f16", "bfloat": "f16", "float": "f32", "double": "f64"}
_FLAGS = r"(?:(?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc)\s+)*"
_TYPE = r"(?:<(\d+) x (half|bfloat|float|double)>|(half|bfloat|float|double))"
_ARITH = re.compile(rf"^\s+%[-\w.$\"]+ = (?:fadd|fsub|fmul|fdiv|frem|fneg)\s+{_FLAGS}{_TYPE}\s")
_CALL = re.compile(rf"\bcall\b[^@]*?{_TYPE} @([\w.$]+)\(")


@dataclass(frozen=True)
class ProgramText:
    """What the interpreter needs to load a device module."""

    device_ir: str
    device_module: object
    files: tuple


def _flop_site(line: str) -> tuple[str, int] | None:
    """(precision, FLOPs) of one IR line, or None."""
    m = _ARITH.match(line)
    weight = 1
    if m is None:
        m = _CALL.search(line)
        if m is None:
            return None
        callee = m.group(4)
        if re.match(r"llvm\.(fma|fmuladd)\.", callee):
            weight = 2
        elif not callee.startswith("__nv_"):
            return None
    lanes = int(m.group(1)) if m.group(1) else 1
    ty = m.group(2) or m.group(3)
    return PRECISIONS[ty], weight * lanes


def flop_precisions(ir: str) -> list[str]:
    """The precisions whose FLOPs `ir` has, in a fixed order."""
    found = {s[0] for line in ir.splitlines() if (s := _flop_site(line))}
    return [p for p in ("f16", "f32", "f64") if p in found]


def augment(ir: str, precision: str) -> str:
    """`ir` with one dead instruction after each FLOP of `precision` (see the module doc)."""
    out: list[str] = []
    n = 0
    for line in ir.splitlines():
        out.append(line)
        site = _flop_site(line)
        if site and site[0] == precision:
            for _ in range(site[1]):
                out.append(f"  %__sirius_flop{n} = add i8 0, 0")
                n += 1
    return "\n".join(out) + "\n"


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


def _run(host: HostProgram, program, kernels, seed: int, dtypes, trace: bool = False):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    dev = CpuDevice(order="forward", seed=seed, jobs=1, trace=trace)
    return run_host_program(host, program, kernels, dev, seed=seed, dtypes=dtypes)


def launch_regions(host: HostProgram) -> list[int]:
    """For each static launch (HostProgram.launches() order) the index of its region: the
    planner's maximal runs of consecutive launches in one host body, in its order."""
    out: list[int] = []
    count = 0

    def body(ops: Sequence[Op]) -> None:
        nonlocal count
        run = 0
        for op in ops:
            if isinstance(op, Launch):
                out.append(count)
                run += 1
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
            segment_blocks: dict[str, tuple[int | None, ...]] | None = None
            ) -> list[LaunchCounts]:
    """Run `host` with device module `ir` and return the model's inputs per dynamic launch;
    `segment_blocks`: per megakernel (its IR name), the blocks each segment gives work to
    (`megakernel_segment_blocks`)."""
    base = _run(host, _program(ir, files), kernels, seed, dtypes)
    flops: list[dict[str, int]] = [{} for _ in base.launches]
    # a megakernel's FLOPs per segment: the same difference, segment by segment
    seg_flops: list[list[dict[str, int]]] = [[{} for _ in r.stats.segments]
                                             for r in base.launches]
    for p in flop_precisions(ir):
        aug = _run(host, _program(augment(ir, p), files), kernels, seed, dtypes)
        for i, (a, b) in enumerate(zip(aug.launches, base.launches, strict=True)):
            flops[i][p] = max(0, a.stats.instructions - b.stats.instructions)
            for k, (sa, sb) in enumerate(zip(a.stats.segments, b.stats.segments, strict=True)):
                seg_flops[i][k][p] = max(0, sa[0] - sb[0])
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
    segment_blocks = segment_blocks or {}
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
            tuple(Segment(ins, ld + st, tuple(sorted(f.items())), nb)
                  for (ins, ld, st), f, nb in zip(
                      s.segments, sfl,
                      segment_blocks.get(op.mangled, (None,) * len(s.segments)),
                      strict=True))))
    return out


def megakernel_segment_blocks(megakernels) -> dict[str, tuple[int | None, ...]]:
    """Per megakernel (FuseResult.megakernels), per segment: the blocks of its grid that get
    work, the most blocks one of the segment's members needs (every member runs over its own
    blocks from block 0, model.Segment.blocks); None where a member's need is not known."""
    from math import prod

    out: dict[str, tuple[int | None, ...]] = {}
    for rec in megakernels:
        k = rec.kernel
        if k is None:
            continue
        threads = prod(k.block)
        per: list[int | None] = []
        for seg in k.spec.segments():
            needs = [k.spec.members[m].blocks_needed(threads) for m in seg]
            per.append(None if any(n is None for n in needs) else max(needs, default=1))
        out[k.name] = tuple(per)
    return out


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
