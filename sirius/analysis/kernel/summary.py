"""What a kernel touches: one `Access` per memory instruction (an ISL relation from the thread
instance to the first byte touched) and the `KernelSummary` of a kernel under one launch binding.
The collector that builds them is kernel/access.py; call sites (kernel/calls.py) use these records
too, which is why they live apart from it."""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.analysis.kernel.affine import THREAD_DIMS, Base, Binding
from sirius.analysis.kernel.domains import LoopDim
from sirius.analysis.kernel.flows import PointerFlow
from sirius.diagnostics import Location


@dataclass(frozen=True, slots=True)
class Access:
    kind: str  # load | store | atomic
    base: Base
    relation: isl.Map  # { [bx, by, bz, tx, ty, tz, loop dims] -> [o] }, o = first byte
    extent: Expr  # bytes touched from o
    whole: bool  # the offset is unknown: any byte of the base
    exact: bool
    reason: str
    loc: Location | None
    opcode: str

    @property
    def reads(self) -> bool:
        return self.kind in ("load", "atomic")

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "atomic")


@dataclass(frozen=True, slots=True)
class KernelSummary:
    name: str
    mangled: str
    binding: Binding
    params: tuple[str, ...]
    loops: tuple[LoopDim, ...]
    accesses: tuple[Access, ...]
    shared_globals: tuple[str, ...]  # IR names, in the order of KernelInfo.shared_arrays
    shared_bytes: tuple[int, ...]
    barriers: int
    thread_independent: bool  # no barrier, shared memory or warp-level op: threads can move
    warnings: tuple[str, ...]
    flows: frozenset[PointerFlow] = frozenset()  # pointers the kernel may store (kernel/flows)

    @property
    def key(self) -> tuple[str, Binding]:
        return self.mangled, self.binding

    def shared_index(self, ir_name: str) -> int:
        return self.shared_globals.index(ir_name)

    def effects(self, level: str = "thread") -> dict[tuple[Base, str], isl.Map]:
        """Read and write sets, (base, "read" | "write") -> bytes touched relative to the base:
        `{ [bx, by, bz, tx, ty, tz] -> [x] }` per thread, `{ [bx, by, bz] -> [x] }` per block,
        `{ [] -> [x] }` for the whole kernel (an unknown offset: any byte)."""
        project = {"thread": thread_level, "block": block_level,
                   "kernel": lambda m: islutil.project_out(m, islutil.in_names(m))}[level]
        out: dict[tuple[Base, str], isl.Map] = {}
        for a in self.accesses:
            rel = a.relation if a.whole else a.relation.apply_range(byte_map(a.extent))
            rel = project(rel)
            for mode, flag in (("read", a.reads), ("write", a.writes)):
                if flag:
                    key = (a.base, mode)
                    out[key] = out[key].union(rel).coalesce() if key in out else rel
        return out


def thread_level(m: isl.Map) -> isl.Map:
    """Project the loop dimensions out: what each thread touches."""
    return islutil.project_out(m, [n for n in islutil.in_names(m) if n not in THREAD_DIMS])


def block_level(m: isl.Map) -> isl.Map:
    return islutil.project_out(m, [n for n in islutil.in_names(m) if n not in THREAD_DIMS[:3]])


def byte_map(extent: Expr) -> isl.Map:
    """{ [o] -> [x] : o <= x < o + extent }"""
    params = sorted(extent.variables())
    head = f"[{', '.join(params)}] -> " if params else ""
    return isl.Map(f"{head}{{ [o] -> [x] : o <= x < o + {extent} }}")
