"""`common-base`: pointer arguments at constant offsets of one allocation become one base pointer
plus constant offsets (the SIRIUS paper's LSTM case).

The host model knows where every pointer argument points: a buffer and a byte offset. When in
every launch of a kernel two pointer parameters point into the same buffer (the buffer may
change from launch to launch) at offsets whose difference is the same constant `d`, the second
is computed in the kernel as `getelementptr i8, ptr %first, i64 d`: the kernel becomes a wrapper
`K` that derives those pointers from the first one and calls its body `K.sirius.cb` (internal,
always inlined), so after `llvm-opt` the accesses through them are the base plus a constant,
which the backend folds into the load/store immediates (`ld.global.f32 %f, [%rd1+4096]`) and
alias analysis sees as one object at known distances. The unused parameters stay in the
signature (the host still passes them). `inbounds` when both offsets lie within the buffer.

Left alone: rotating addresses (ping-pong buffers), offsets that depend on a host loop
variable, pointers in another address space, kernels that host-constants would also refuse
(byval parameters, optnone). Requires the fused host program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import BufferArg, DevRef, HostProgram, Launch
from sirius.postopt.base import ModulePass, PassContext, PassInput
from sirius.postopt.kernel_text import KernelText, ModuleEdit

__all__ = ["CommonBase", "SUFFIX", "shared_bases"]

SUFFIX = ".sirius.cb"


def _where(arg: object) -> tuple[str, int] | None:
    """(buffer, constant byte offset) of a pointer argument, or None."""
    if not isinstance(arg, BufferArg) or not isinstance(arg.address, DevRef):
        return None
    off = arg.address.offset
    if isinstance(off, Expr):
        if not off.is_const:
            return None
        return arg.address.buffer, off.const
    return None


def shared_bases(k: KernelText, ops: list[Launch], host: HostProgram
                 ) -> list[tuple[int, list[tuple[int, int, bool]]]]:
    """Groups of pointer parameters of `k` at one constant distance from a base parameter in
    every launch: [(base index, [(index, byte distance, inbounds), ...]), ...]."""
    sizes = {b.name: b.bytes for b in host.buffers}
    where = [[_where(a) for a in op.args] for op in ops]
    ptrs = [i for i, p in enumerate(k.params) if p.type == "ptr"
            and all(w[i] is not None for w in where)]
    taken: set[int] = set()
    out = []
    for b in ptrs:
        if b in taken:
            continue
        members = []
        for j in ptrs:
            if j <= b or j in taken:
                continue
            deltas = set()
            inb = True
            for w in where:
                (buf_b, off_b), (buf_j, off_j) = w[b], w[j]  # type: ignore[misc]
                if buf_b != buf_j:
                    break
                deltas.add(off_j - off_b)
                size = sizes.get(buf_b)
                inb = inb and size is not None and 0 <= off_b <= size and 0 <= off_j <= size
            else:
                if len(deltas) == 1:
                    members.append((j, deltas.pop(), inb))
        if members:
            taken |= {b, *(j for j, _, _ in members)}
            out.append((b, members))
    return out


@dataclass(frozen=True, slots=True)
class CommonBase(ModulePass):
    """Pointer arguments at constant distances in one allocation: one base plus offsets."""

    name: ClassVar[str] = "common-base"
    requires: ClassVar[tuple[str, ...]] = ("host_program",)

    def run(self, module: PassInput, ctx: PassContext) -> str:
        host = ctx.host_program
        assert host is not None  # `requires` makes the pass manager check it
        edit = ModuleEdit(module.text)
        launches = host.launches_by_kernel()
        for name, k in edit.kernels.items():
            ops = launches.get(name)
            if not ops or any(len(op.args) != len(k.params) for op in ops) or \
                    not edit.wrappable(k, SUFFIX):
                continue
            groups = shared_bases(k, ops, host)
            if not groups:
                continue
            args = [f"{p.type} %a{i}" for i, p in enumerate(k.params)]
            prelude = []
            for b, members in groups:
                for j, d, inb in members:
                    gep = "getelementptr inbounds" if inb else "getelementptr"
                    prelude.append(f"%cb{j} = {gep} i8, ptr %a{b}, i64 {d}")
                    args[j] = f"ptr %cb{j}"
            edit.replace(name, [edit.body(k, SUFFIX),
                                "\n".join(k.wrapper(name, args, tuple(prelude), SUFFIX))])
        return edit.text() if edit.changed() else module.text
