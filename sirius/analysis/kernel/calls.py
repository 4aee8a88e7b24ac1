"""The accesses of a non-inlined device function, seen from one of its call sites.

A callee is summarised once per launch configuration (bottom-up, as the paper does): its own
access relations over `[bx, by, bz, tx, ty, tz, <its loops>]`, relative to its pointer
parameters, with its integer parameters as isl parameters `_p__d<depth>a<j>`. At a call site the
summary is moved into the caller: the callee's loop dimensions are projected out (one call
touches what all its iterations touch), the integer parameters are bound to the caller's values
of the arguments (projected out, and the access made inexact, where an argument is not affine),
each access through pointer parameter j becomes an access through what argument j points to,
shifted by its offset, and everything is restricted to the domain of the calling block. Module
globals and shared arrays keep their base. Recursion, or a call chain deeper than
MAX_CALL_DEPTH, is not followed: such a call touches everything (`_everything`).
"""

from __future__ import annotations

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.analysis.irview import Block, Function, Instr, ModuleView
from sirius.analysis.kernel.affine import ANY, THREAD_DIMS, Base, Binding, Val, loaded
from sirius.analysis.kernel.facts import KernelInfo, Param
from sirius.analysis.kernel.summary import Access, thread_level
from sirius.diagnostics import Location

MAX_CALL_DEPTH = 6
_SKIPPED = ("local", "null")


def callee_info(view: ModuleView, fn: Function, depth: int) -> KernelInfo:
    """What the access analysis needs to know about a device function to summarise it like a
    kernel: its parameters, named so that no two call depths share an isl parameter."""
    params = tuple(Param(f"_d{depth}a{j}", "", a.type) for j, a in enumerate(fn.args))
    return KernelInfo(
        name=view.source_name(fn) or fn.name, mangled=fn.name, loc=Location("<unknown>", 0),
        params=params, launch_bounds=None, static_smem_bytes=0, dynamic_smem=False,
        shared_arrays=(), barriers=0, warp_ops=(), atomics=(), inline_asm=(), textures=False,
        calls=(), libdevice=(), indirect_calls=0, recursive=False)


def callee_binding(binding: Binding) -> Binding:
    """The callee runs in the caller's threads: same grid and block; its scalars are unknown
    (they are bound at each call site)."""
    return Binding(binding.grid, binding.block, (), binding.smem)


class CallSites:
    """Mixed into the access collector (kernel/access.py `_Flow`): it supplies `space`, `dom`,
    `loops`, `ev`, `exact`, `warnings`, `_allowed`, `_everything`, `analyzer` and `depth`."""

    def _call_site(self, ins: Instr, b: Block, callee: Function) -> list:
        summary = None
        if self.analyzer is not None and self.depth < MAX_CALL_DEPTH \
                and callee.name not in self.stack:
            summary = self.analyzer.callee_summary(callee, self.binding, self.depth + 1,
                                                   self.stack + (self.fn.name,))
        if summary is None:
            why = "recursive call" if callee.name in self.stack + (self.fn.name,) else \
                "call chain too deep"
            name = self.view.source_name(callee) or callee.name
            return self._everything(ins, b, f"{why} to {name}")
        self.warnings.extend(summary.warnings)
        dom = self.dom[b]
        block_reason = self.exact.get(b, "")
        allowed = self._allowed(b) | set(self.space.params)
        outside = [lp.dim for lp in self.loops.values() if b not in lp.nl.blocks]
        prefix = f"_p__d{self.depth + 1}a"
        out = []
        for a in summary.accesses:
            rel = self._into_caller(thread_level(a.relation))
            rel, bound, why = self._bind_scalars(rel, ins, prefix, allowed)
            for base, cond, expr, v_exact, v_reason in self._bases(a.base, ins):
                if base.space in _SKIPPED:
                    continue
                whole = a.whole or expr is None or not expr.variables() <= allowed \
                    or not a.extent.variables() <= allowed
                where = dom if cond is None else dom.intersect(cond)
                if whole:
                    r = isl.Map.from_domain_and_range(rel.domain(), isl.Set("{ [o] }"))
                else:
                    r = rel.sum(self.space.map_to_offset(expr))
                r = islutil.project_out(r.intersect_domain(where), outside)
                r = r.detect_equalities().coalesce()
                if r.is_empty():
                    continue
                exact = a.exact and bound and v_exact and not whole and not block_reason
                reason = "" if exact else (a.reason or why or v_reason or block_reason or
                                           "address not affine")
                ext = a.extent if not whole else Expr(1)
                out.append(Access(a.kind, base, r, ext, whole, exact, reason,
                                  a.loc or self.view.loc(ins), a.opcode))
        return out

    def _into_caller(self, rel: isl.Map) -> isl.Map:
        """{ [bx, .., tz] -> [o] } as { [caller dims] -> [o] }."""
        dims = ", ".join(self.space.dims)
        head = f"[{', '.join(self.space.params)}] -> " if self.space.params else ""
        to_threads = isl.Map(f"{head}{{ [{dims}] -> [{', '.join(THREAD_DIMS)}] }}")
        return to_threads.apply_range(rel)

    def _bind_scalars(self, rel: isl.Map, ins: Instr, prefix: str, allowed: set[str]
                      ) -> tuple[isl.Map, bool, str]:
        """The callee's integer parameters bound to the arguments' values at this call."""
        bound, why = True, ""
        for name in islutil.param_names(rel):
            if not name.startswith(prefix):
                continue
            j = int(name[len(prefix):])
            v = self.ev.value(ins.args[j]) if j < len(ins.args) else Val(None)
            sub = None
            if v.known and all(p.expr is not None and p.expr.variables() <= allowed
                               for p in v.pieces):
                params = [*self.space.params, name]
                head = f"[{', '.join(params)}] -> "
                for p in v.pieces:
                    s = isl.Set(f"{head}{{ [{', '.join(self.space.dims)}] : {name} = {p.expr} }}")
                    if p.cond is not None:
                        s = s.intersect(p.cond)
                    sub = s if sub is None else sub.union(s)
            if sub is not None:
                rel = rel.intersect_domain(sub)
                bound = bound and v.exact
            else:
                bound, why = False, why or f"an integer argument of the call is not affine " \
                                           f"({v.reason or 'unknown'})"
            rel = islutil.project_out(rel, [name]).coalesce()
        return rel, bound, why

    def _bases(self, base: Base, ins: Instr
               ) -> list[tuple[Base, isl.Set | None, Expr | None, bool, str]]:
        """What a callee base is at this call: (caller base, condition, offset, exact, why)."""
        if base.space == "param":
            j = int(base.ref)  # type: ignore[arg-type]
            v = self.ev.value(ins.args[j]) if j < len(ins.args) else Val(None)
            if not v.known:
                return [(ANY, None, None, False, f"address unknown: {v.reason}")]
            return [(p.base or ANY, p.cond, p.expr, v.exact, v.reason) for p in v.pieces]
        if base.space == "loaded":
            return [(self._loaded_base(base, ins), None, None, False, "pointer loaded from memory")]
        return [(base, None, Expr(0), True, "")]

    def _loaded_base(self, base: Base, ins: Instr) -> Base:
        srcs: set[Base] = set()
        for s in base.ref:  # type: ignore[union-attr]
            if s.space == "param":
                j = int(s.ref)
                v = self.ev.value(ins.args[j]) if j < len(ins.args) else Val(None)
                srcs |= {p.base or ANY for p in v.pieces} if v.known else {ANY}
            else:
                srcs.add(self._loaded_base(s, ins) if s.space == "loaded" else s)
        return loaded(srcs)
