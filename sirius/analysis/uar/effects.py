"""Statements of the host program and what each does to each buffer.

A statement is a launch, copy, memset or sync of the host model, with the host loops around it:
its instance space is `S<k>[<host loop vars>]` for host operations and `S<k>[<host loop vars>,
bx, by, bz, tx, ty, tz]` for launches (one instance per GPU thread). Its effects map instances to
the bytes of host buffers (`b<id>[x]`, x a byte offset from the start of the allocation), reads
and writes separately. A launch's effects come from the kernel's access relations, computed once
per (kernel, launch configuration) and moved to the buffers its pointer arguments resolve to.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.analysis.host.model import (
    BufferArg,
    Copy,
    DevRef,
    HostProgram,
    HostRef,
    Launch,
    Loop,
    Memset,
    Op,
    Rotating,
    ScalarArg,
    Sync,
)
from sirius.analysis.kernel.access import (
    Access,
    KernelAnalyzer,
    KernelSummary,
    byte_map,
    thread_level,
)
from sirius.analysis.kernel.affine import THREAD_DIMS, Binding
from sirius.analysis.uar.pointsto import EVERY, PointsTo, initializer_refs, module_globals
from sirius.diagnostics import Location

READ, WRITE = "read", "write"


@dataclass(frozen=True, slots=True)
class Statement:
    id: str  # S0, S1, ... in program order
    kind: str  # launch | copy | memset | sync
    op: Op
    loops: tuple[Loop, ...]  # enclosing host loops, outermost first
    position: tuple[int, ...]  # index of the op in each enclosing body, outermost first
    domain: isl.Set  # { S3[l, t] : ... }
    launch_index: int | None = None
    loc: Location | None = None

    @property
    def vars(self) -> tuple[str, ...]:
        return tuple(lp.var for lp in self.loops)

    @property
    def dims(self) -> tuple[str, ...]:
        return self.vars + (THREAD_DIMS if self.kind == "launch" else ())

    @property
    def label(self) -> str:
        op = self.op
        if isinstance(op, Launch):
            return op.kernel
        if isinstance(op, Copy):
            return f"copy {op.kind}"
        return self.kind


@dataclass(frozen=True, slots=True)
class Effect:
    """The bytes one statement reads or writes in one buffer (thread-level for launches)."""

    buffer: str  # host buffer name, or @name for a device global variable
    mode: str  # read | write
    relation: isl.Map  # { S[dims] -> b<id>[x] }
    exact: bool
    atomic: bool
    box: tuple[int, int] | None  # inclusive byte range over all instances, None if empty


@dataclass(frozen=True, slots=True)
class LaunchEffects:
    """Per launch statement, for the soundness check: kernel-level byte relations
    `{ [bx, .., tz] -> [x] }` with the host loop variables as parameters."""

    summary: KernelSummary
    global_: dict[tuple[int, str], isl.Map]  # (buffer id, load|store|atomic) -> relation
    shared: dict[tuple[int, str], isl.Map]  # (shared array index, kind) -> relation
    accesses: int
    exact: int
    variables: dict[tuple[str, str], isl.Map] = field(default_factory=dict)  # (@name, kind)


@dataclass
class _Acc:
    maps: list[isl.Map] = field(default_factory=list)
    exact: bool = True
    atomic: bool = False


def binding_of(launch: Launch) -> Binding:
    scalars = tuple(a.value if isinstance(a, ScalarArg) and isinstance(a.value, Expr)
                    and a.type.startswith("i") else None for a in launch.args)
    return Binding(launch.grid, launch.block, scalars, launch.smem)


def walk(program: HostProgram) -> list[tuple[Op, tuple[Loop, ...], tuple[int, ...]]]:
    """Every non-loop op with its enclosing loops and position, in program order."""
    out: list[tuple[Op, tuple[Loop, ...], tuple[int, ...]]] = []

    def go(ops: tuple[Op, ...], loops: tuple[Loop, ...], pos: tuple[int, ...]) -> None:
        for i, op in enumerate(ops):
            if isinstance(op, Loop):
                go(op.body, loops + (op,), pos + (i,))
            elif isinstance(op, Launch | Copy | Memset | Sync):
                out.append((op, loops, pos + (i,)))

    go(program.ops, (), ())
    return out


def host_domain(loops: tuple[Loop, ...]) -> str:
    """isl constraints on the host loop variables of a statement."""
    parts = []
    for lp in loops:
        v = lp.var
        if lp.hi is None:
            parts.append(f"{v} >= 0")
            continue
        rel = "<" if lp.step > 0 else ">"
        lo = ">=" if lp.step > 0 else "<="
        parts.append(f"{v} {lo} {lp.lo} and {v} {rel} {lp.hi}")
        if abs(lp.step) != 1:
            parts.append(f"({v} - ({lp.lo})) mod {abs(lp.step)} = 0")
    return " and ".join(parts) or "true"


def _params_set(constraint: str, names: set[str]) -> isl.Set:
    head = f"[{', '.join(sorted(names))}] -> " if names else ""
    return isl.Set(f"{head}{{ : {constraint} }}")


def _vars_of(loops: tuple[Loop, ...]) -> set[str]:
    out = {lp.var for lp in loops}
    for lp in loops:
        out |= lp.lo.variables() | (lp.hi.variables() if lp.hi is not None else set())
    return out


def _shift(extent: Expr, offset: Expr) -> isl.Map:
    """{ [o] -> [x] : o + offset <= x < o + offset + extent }"""
    names = sorted(extent.variables() | offset.variables())
    head = f"[{', '.join(names)}] -> " if names else ""
    return isl.Map(f"{head}{{ [o] -> [x] : o + {offset} <= x < o + {offset} + {extent} }}")


def _range(lo: Expr, size: Expr, cond: str = "true") -> isl.Set:
    names = sorted(lo.variables() | size.variables() | _names(cond))
    head = f"[{', '.join(names)}] -> " if names else ""
    return isl.Set(f"{head}{{ [x] : {lo} <= x < {lo} + {size} and {cond} }}")


def _choices(addr: DevRef | Rotating) -> list[tuple[DevRef, str]]:
    if isinstance(addr, DevRef):
        return [(addr, "true")]
    n = len(addr.choices)
    return [(c, f"({addr.index}) mod {n} = {i}") for i, c in enumerate(addr.choices)]


class EffectBuilder:
    def __init__(self, program: HostProgram, kernels: KernelAnalyzer):
        self.program = program
        self.kernels = kernels
        self.globals = module_globals(kernels.view)
        self.sizes = {b.name: b.bytes for b in program.buffers}
        self.sizes.update({g: n for g, n in self.globals.items() if n})
        self.ids = {b.name: b.id for b in program.buffers}
        self.points = PointsTo(program, self._all_launches, self.globals,
                               initializer_refs(kernels.view, self.globals))
        self.warnings: list[str] = []

    def _all_launches(self) -> list[tuple[Launch, KernelSummary]]:
        return [(launch, self.kernels.summary(launch.mangled, binding_of(launch)))
                for launch in self.program.launches()]

    def tuple_of(self, buffer: str) -> str:
        if buffer in self.ids:
            return f"b{self.ids[buffer]}"
        return "g_" + "".join(ch if ch.isalnum() else "_" for ch in buffer.lstrip("@"))

    # launches ---------------------------------------------------------------------------------
    def launch_key(self, st: Statement, summary: KernelSummary
                   ) -> tuple[tuple, tuple[str, ...]] | None:
        """Everything a launch statement's effects depend on, with its buffers named by their
        order of appearance (`#0`, `#1`, ...), and those buffers: the launch (kernel,
        dimensions, arguments), the host loops around it, and the size of each buffer. The
        layers of a model (the same kernel on other buffers at the same offsets) and a launch
        whose buffers storage splitting renamed share one key. None where an access's base is
        found by points-to (that depends on the whole program): always recomputed."""
        launch = st.op
        if any(acc.base.space in ("any", "loaded") for acc in summary.accesses):
            return None
        names: dict[str, str] = {}

        def ref(r: DevRef) -> DevRef:
            if r.buffer not in self.ids:
                return r
            return DevRef(names.setdefault(r.buffer, f"#{len(names)}"), r.offset)

        args = []
        for a in launch.args:
            if isinstance(a, BufferArg):
                addr = a.address
                a = BufferArg(ref(addr) if isinstance(addr, DevRef) else
                              Rotating(tuple(ref(c) for c in addr.choices), addr.index))
            args.append(a)
        shape = Launch("", launch.mangled, launch.grid, launch.block, launch.smem, tuple(args))
        key = (shape, host_domain(st.loops), st.vars, tuple(self.sizes.get(b) for b in names))
        return key, tuple(names)

    def launch(self, st: Statement) -> tuple[tuple[Effect, ...], LaunchEffects]:
        """A launch statement's effects (finished: `finish`) and its kernel-level relations;
        from the analyzer's memo where a launch of the same shape was built before (in this
        UAR or an earlier one of the module), renamed to this statement and its buffers."""
        launch = st.op
        assert isinstance(launch, Launch)
        summary = self.kernels.summary(launch.mangled, binding_of(launch))
        keyed = self.launch_key(st, summary)
        memo = self.kernels.launch_effects
        hit = memo.get(keyed[0]) if keyed is not None else None
        if not hit:  # None: not built yet; False: no template (see _template)
            raw, le = self._launch(st, launch, summary)
            effects = self.finish(st, raw)
            if keyed is not None and hit is None:
                memo[keyed[0]] = _template(effects, le, keyed[1], self.ids) or False
            return effects, le
        self.warnings.extend(summary.warnings)
        buffers = keyed[1]
        effects_t, glob_t, le_t = hit

        def real(name: str) -> str:
            return buffers[int(name[1:])] if name.startswith("#") else name

        effects = tuple(sorted((replace(e, buffer=real(e.buffer), relation=islutil.set_tuple(
            e.relation, st.id, self.tuple_of(real(e.buffer)))) for e in effects_t),
            key=lambda e: (e.buffer, e.mode)))
        glob = {(self.ids[buffers[ph]], kind): rel for (ph, kind), rel in glob_t.items()}
        return effects, replace(le_t, global_=glob)

    def _launch(self, st: Statement, launch: Launch, summary: KernelSummary
                ) -> tuple[dict[tuple[str, str], _Acc], LaunchEffects]:
        host = _params_set(host_domain(st.loops), _vars_of(st.loops))
        per_buffer: dict[tuple[str, str], _Acc] = {}
        glob: dict[tuple[int, str], isl.Map] = {}
        shared: dict[tuple[int, str], isl.Map] = {}
        variables: dict[tuple[str, str], isl.Map] = {}
        for w in summary.warnings:
            self.warnings.append(w)
        for acc in summary.accesses:
            for buffer, rel in self._targets(acc, summary, launch):
                rel = rel.intersect_params(host).coalesce()
                if rel.is_empty():
                    continue
                if buffer.startswith("%shared:"):
                    idx = int(buffer.split(":", 1)[1])
                    _merge(shared, (idx, acc.kind), rel)
                    continue
                if buffer in self.ids:
                    _merge(glob, (self.ids[buffer], acc.kind), rel)
                else:
                    _merge(variables, (buffer, acc.kind), rel)
                for mode in (READ, WRITE):
                    if (mode == READ and acc.reads) or (mode == WRITE and acc.writes):
                        a = per_buffer.setdefault((buffer, mode), _Acc())
                        a.maps.append(rel)
                        a.exact &= acc.exact
                        a.atomic |= acc.kind == "atomic"
        effects = LaunchEffects(summary, glob, shared, len(summary.accesses),
                                sum(a.exact for a in summary.accesses), variables)
        return per_buffer, effects

    def _targets(self, acc: Access, summary: KernelSummary, launch: Launch
                 ) -> list[tuple[str, isl.Map]]:
        """(buffer, kernel-level byte relation) pairs an access resolves to in a launch."""
        rel = thread_level(acc.relation)
        base = acc.base
        out: list[tuple[str, isl.Map]] = []
        if base.space in ("any", "loaded"):
            found = self.points.objects(base, launch)
            objects = self.points.expand(found)
            for name in sorted(objects):
                if name in self.sizes or name in self.globals:
                    out.append((name, self._whole(rel, name, Expr(0), "true")))
                elif name.startswith("%shared:") and name[8:] in summary.shared_globals:
                    i = summary.shared_index(name[8:])
                    out.append((f"%shared:{i}", self._whole_shared(rel, i, summary.shared_bytes[i],
                                                                   summary)))
            if EVERY in found:
                for i, size in enumerate(summary.shared_bytes):
                    out.append((f"%shared:{i}", self._whole_shared(rel, i, size, summary)))
            return out
        if base.space == "shared":
            i = summary.shared_index(str(base.ref))
            if acc.whole:
                return [(f"%shared:{i}", self._whole_shared(rel, i, summary.shared_bytes[i],
                                                           summary))]
            return [(f"%shared:{i}", rel.apply_range(byte_map(acc.extent)))]
        if base.space in ("global", "const"):
            name = f"@{base.ref}"
            if acc.whole:
                return [(name, self._whole(rel, name, Expr(0), "true"))]
            return [(name, rel.apply_range(byte_map(acc.extent)))]
        if base.space != "param":
            return []
        arg = launch.args[int(base.ref)] if int(base.ref) < len(launch.args) else None
        if not isinstance(arg, BufferArg):
            return []
        for ref, cond in _choices(arg.address):
            if acc.whole:
                out.append((ref.buffer, self._whole(rel, ref.buffer, ref.offset, cond)))
            else:
                m = rel.apply_range(_shift(acc.extent, ref.offset))
                out.append((ref.buffer, m.intersect_params(_params_set(
                    cond, ref.offset.variables() | _names(cond)))))
        return out

    def _whole(self, rel: isl.Map, buffer: str, offset: Expr, cond: str) -> isl.Map:
        size = self.sizes.get(buffer)
        names = offset.variables() | _names(cond)
        rng = _range(Expr(0), Expr(size), cond) if size is not None else \
            isl.Set("{ [x] }").intersect_params(_params_set(cond, names))
        return isl.Map.from_domain_and_range(rel.domain(), rng)

    def _whole_shared(self, rel: isl.Map, i: int, size: int, summary: KernelSummary) -> isl.Map:
        total = Expr(size) if size else summary.binding.smem
        return isl.Map.from_domain_and_range(rel.domain(), _range(Expr(0), total))

    # host operations --------------------------------------------------------------------------
    def host_op(self, st: Statement) -> dict[tuple[str, str], _Acc]:
        op = st.op
        out: dict[tuple[str, str], _Acc] = {}
        host = _params_set(host_domain(st.loops), _vars_of(st.loops))
        sides: list[tuple[DevRef | Rotating, Expr, str]] = []
        if isinstance(op, Copy):
            if not isinstance(op.dst, HostRef):
                sides.append((op.dst, op.bytes, WRITE))
            if not isinstance(op.src, HostRef):
                sides.append((op.src, op.bytes, READ))
        elif isinstance(op, Memset):
            sides.append((op.dst, op.bytes, WRITE))
        for addr, nbytes, mode in sides:
            for ref, cond in _choices(addr):
                s = _range(ref.offset, nbytes, cond).intersect_params(host)
                if s.is_empty():
                    continue
                m = isl.Map.from_range(s)
                a = out.setdefault((ref.buffer, mode), _Acc())
                a.maps.append(m)
        return out

    # assembling statement effects -------------------------------------------------------------
    def finish(self, st: Statement, raw: dict[tuple[str, str], _Acc]) -> tuple[Effect, ...]:
        effects = []
        for (buffer, mode), acc in sorted(raw.items()):
            rel = acc.maps[0]
            for m in acc.maps[1:]:
                rel = rel.union(m)
            rel = islutil.params_to_in(rel.coalesce(), list(st.vars))
            if st.kind == "launch":  # the thread dimensions follow the host loop variables
                rel = islutil.name_dims(rel, "in", st.dims)
            rel = islutil.set_tuple(rel, st.id, self.tuple_of(buffer))
            box = _byte_box(str(rel.range().reset_tuple_id()))
            effects.append(Effect(buffer, mode, rel, acc.exact, acc.atomic, box))
        return tuple(effects)


def _template(effects: tuple[Effect, ...], le: LaunchEffects, buffers: tuple[str, ...],
              ids: dict[str, int]) -> tuple | None:
    """A launch's effects with its buffers as placeholders (`#k`: buffers[k]), for the memo
    of `EffectBuilder.launch`."""
    ph = {b: f"#{k}" for k, b in enumerate(buffers)}
    by_id = {ids[b]: k for k, b in enumerate(buffers)}
    effects_t = tuple(replace(e, buffer=ph.get(e.buffer, e.buffer)) for e in effects)
    if any(i not in by_id for i, _ in le.global_):  # a buffer no argument names: no template
        return None
    glob_t = {(by_id[i], kind): rel for (i, kind), rel in le.global_.items()}
    return effects_t, glob_t, le


@functools.lru_cache(maxsize=8192)
def _byte_box(text: str) -> tuple[int, int] | None:
    """[min, max] of the bytes of an effect's range, by its text: the launches of a model's
    layers and the UAR rebuilt after storage splitting ask the same question again."""
    s = isl.Set(text)
    return islutil.bounds(s, islutil.names(s, isl.dim_type.set)[0])


def _names(constraint: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", constraint)) - {"mod", "and", "or", "true", "floor"}


def _merge(d: dict, key, rel: isl.Map) -> None:
    d[key] = d[key].union(rel) if key in d else rel
