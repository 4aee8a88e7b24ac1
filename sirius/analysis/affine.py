"""Affine expressions over the LLVM values of a kernel, for one launch configuration.

A value is a `Val`: a few `Piece`s, each a quasi-affine `Expr` over the instance dimensions
(block ids `bx, by, bz`, thread ids `tx, ty, tz`, one dimension per enclosing loop) and the
host loop variables (isl parameters), valid where its isl `cond` holds (None: everywhere); a
pointer piece also has a `Base` (which parameter or shared array it points into). `select`s and
phis that merge different values become several pieces. Whatever cannot be expressed is unknown
(`pieces is None`, or a pointer piece with `expr None`) with the reason recorded; a value built
by over-approximation (a select on an unknown condition keeps both sides) has `exact=False`.

Assumptions, written down: index arithmetic does not wrap (`sext`, `trunc`, `zext nneg` are the
identity; a `zext` of a possibly negative value is split in two pieces), divisions and shifts of
indices act on non-negative values (C's truncation equals `floor` there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from sirius.analysis.expr import Expr
from sirius.analysis.irtypes import TypeParseError, field_offset, type_size
from sirius.analysis.irview import Argument, Const, ConstExpr, Function, Instr, Value

THREAD_DIMS = ("bx", "by", "bz", "tx", "ty", "tz")
MAX_PIECES = 16
_SREG_RE = re.compile(r"llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid|ntid|nctaid)\.([xyz])$")
_AXIS = {"x": 0, "y": 1, "z": 2}
_ADDRSPACE_RE = re.compile(r"addrspace\((\d+)\)")
_SPACE_OF = {1: "global", 3: "shared", 4: "const", 5: "local"}


@dataclass(frozen=True, slots=True)
class Binding:
    """What a launch fixes: grid and block sizes, the integer scalar arguments (None where the
    value is not an integer the host model knows) and the dynamic shared memory bytes."""

    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    scalars: tuple[Expr | None, ...]
    smem: Expr = Expr(0)

    def host_vars(self) -> list[str]:
        out: set[str] = set()
        for e in (*self.grid, *self.block, *(s for s in self.scalars if s is not None), self.smem):
            out |= e.variables()
        return sorted(out)


@dataclass(frozen=True, slots=True)
class Base:
    """Where a pointer points: `param` (kernel parameter `ref`), `shared` (array `ref`, an IR
    global), `global`/`const` (a module global), `local` (thread-private) or `any`."""

    space: str
    ref: int | str = ""


ANY = Base("any")


@dataclass(frozen=True, slots=True)
class Piece:
    cond: isl.Set | None
    expr: Expr | None
    base: Base | None = None


@dataclass(frozen=True, slots=True)
class Val:
    pieces: tuple[Piece, ...] | None
    exact: bool = True
    reason: str = ""

    @property
    def known(self) -> bool:
        return self.pieces is not None

    def inexact(self, reason: str) -> Val:
        return Val(self.pieces, False, reason)

    def single(self) -> Expr | None:
        if self.pieces and len(self.pieces) == 1 and self.pieces[0].cond is None:
            return self.pieces[0].expr
        return None


def same(a: Val, b: Val) -> bool:
    """The same value (conditions compared by identity: cheap and sufficient for phis)."""
    if a.pieces is None or b.pieces is None:
        return False
    return a.exact == b.exact and len(a.pieces) == len(b.pieces) and all(
        p.cond is q.cond and p.expr == q.expr and p.base == q.base
        for p, q in zip(a.pieces, b.pieces, strict=False))


def const(v: int | Expr) -> Val:
    return Val((Piece(None, Expr.of(v)),))


def unknown(reason: str) -> Val:
    return Val(None, False, reason)


@dataclass(frozen=True, slots=True)
class Cond:
    """Where an i1 value may be true; `exact` when it is true exactly there."""

    may: isl.Set
    exact: bool = True
    reason: str = ""


class Space:
    """The isl space of one kernel under one binding: dimension and parameter names."""

    def __init__(self, dims: list[str], params: list[str]):
        self.dims = dims
        self.params = params
        self._head = f"[{', '.join(params)}] -> " if params else ""
        self._tuple = f"[{', '.join(dims)}]"
        self.universe = isl.Set(f"{self._head}{{ {self._tuple} }}")
        self.empty = self.universe.subtract(self.universe)
        self._cache: dict[str, isl.Set] = {}

    def set(self, constraint: str) -> isl.Set:
        s = self._cache.get(constraint)
        if s is None:
            s = isl.Set(f"{self._head}{{ {self._tuple} : {constraint} }}")
            self._cache[constraint] = s
        return s

    def map_to_offset(self, expr: Expr) -> isl.Map:
        return isl.Map(f"{self._head}{{ {self._tuple} -> [o] : o = {expr} }}")

    def later(self, dim: str, step: int) -> isl.Map:
        """{ [.., dim, ..] -> [.., w, ..] : w comes after dim (step > 0: w > dim) }"""
        out = ["__w" if d == dim else d for d in self.dims]
        rel = ">" if step > 0 else "<"
        return isl.Map(f"{self._head}{{ {self._tuple} -> [{', '.join(out)}] : __w {rel} {dim} }}")


def _and(a: isl.Set | None, b: isl.Set | None) -> isl.Set | None:
    if a is None:
        return b
    if b is None:
        return a
    return a.intersect(b)


def _rel(a: Expr, b: Expr, pred: str) -> str:
    signed = {"eq": "=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
    if pred in signed:
        return f"{a} {signed[pred]} {b}"
    if pred == "ne":
        return f"({a} < {b} or {a} > {b})"
    if pred in ("ugt", "uge"):
        a, b, pred = b, a, {"ugt": "ult", "uge": "ule"}[pred]
    op = "<" if pred == "ult" else "<="
    # unsigned order on the 32/64-bit patterns of signed values: negatives are the largest
    return (f"(({a} >= 0 and {b} < 0) or ((({a} >= 0 and {b} >= 0) or ({a} < 0 and {b} < 0)) "
            f"and {a} {op} {b}))")


def _elem_type(ty: str) -> str | None:
    m = re.fullmatch(r"[\[<]\d+ x (.+)[\]>]", ty.strip())
    return m.group(1) if m else None


def space_of_global(global_text: str) -> str:
    decl = global_text.split(" = ", 1)[-1]
    head = re.split(r"\b(?:global|constant)\b", decl, maxsplit=1)[0]
    m = _ADDRSPACE_RE.search(head)
    space = _SPACE_OF.get(int(m.group(1)) if m else 0, "global")
    if space == "global" and re.search(r"\bconstant\b", decl):
        return "const"
    return space


class ValueEval:
    """Evaluates the integer, pointer and i1 values of one kernel under one binding.

    `loop_value` (set by the caller for each loop header phi) and `phi_pieces` (a callback giving
    the pieces of a phi that merges control flow) connect it to the control-flow analysis.
    """

    def __init__(self, fn: Function, binding: Binding, space: Space, structs: dict[str, str],
                 globals_: dict[str, str], loc_of, param_names: list[str]):
        self.fn = fn
        self.param_names = param_names
        self.binding = binding
        self.space = space
        self.structs = structs
        self.globals = globals_
        self.loc_of = loc_of
        self.memo: dict[Value, Val] = {}
        self.cmemo: dict[Value, Cond] = {}
        self.loop_value: dict[Instr, Val] = {}
        self.phi_pieces = None  # Callable[[Instr], Val]

    # helpers ----------------------------------------------------------------------------------
    def _where(self, v: Value) -> str:
        loc = self.loc_of(v) if isinstance(v, Instr) else None
        return f" (line {loc.line})" if loc else ""

    def _lift(self, vals: list[Val], f, what: str) -> Val:
        """Apply f to every combination of pieces (conditions intersected)."""
        for v in vals:
            if not v.known:
                return v
        combos: list[tuple[isl.Set | None, list[Piece]]] = [(None, [])]
        for v in vals:
            combos = [(_and(c, p.cond), ps + [p]) for c, ps in combos for p in v.pieces]
            combos = [(c, ps) for c, ps in combos if c is None or not c.is_empty()]
            if len(combos) > MAX_PIECES:
                return unknown(f"too many cases in {what}")
        out = []
        for c, ps in combos:
            r = f(*ps)
            if r is None:
                return unknown(what)
            out.append(r if isinstance(r, Piece) else Piece(c, r))
            if isinstance(r, Piece) and c is not None:
                out[-1] = Piece(_and(c, r.cond), r.expr, r.base)
        return Val(tuple(out), all(v.exact for v in vals), "; ".join(v.reason for v in vals
                                                                       if v.reason))

    def _int2(self, a: Val, b: Val, f, what: str) -> Val:
        def g(pa: Piece, pb: Piece):
            if pa.expr is None or pb.expr is None:
                return None
            return f(pa.expr, pb.expr)

        return self._lift([a, b], g, what)

    # integers and pointers --------------------------------------------------------------------
    def value(self, v: Value) -> Val:
        got = self.memo.get(v)
        if got is None:
            got = self._value(v)
            self.memo[v] = got
        return got

    def _value(self, v: Value) -> Val:
        if isinstance(v, Const):
            if not isinstance(v.value, int):
                return unknown("float constant")
            return const(signed(v.value, v.type))
        if isinstance(v, Argument):
            if v.type.startswith("ptr"):
                return Val((Piece(None, Expr(0), Base("param", v.index)),))
            s = self.binding.scalars[v.index] if v.index < len(self.binding.scalars) else None
            return const(s) if s is not None else const(Expr.var(self.param_names[v.index]))
        if v.kind == "global":
            space = space_of_global(self.globals.get(v.name, ""))
            return Val((Piece(None, Expr(0), Base(space, v.name)),))
        if isinstance(v, ConstExpr):
            return self._const_expr(v.text)
        if v.kind == "null":
            return Val((Piece(None, Expr(0), Base("null")),))
        if not isinstance(v, Instr):
            return unknown(f"{v.kind} value")
        return self._instr(v)

    def _const_expr(self, text: str) -> Val:
        g = re.search(r"@([-\w.$]+|\"[^\"]+\")", text)
        if g is None:
            return unknown("constant expression")
        name = g.group(1).strip('"')
        base = Base(space_of_global(self.globals.get(name, "")), name)
        m = re.fullmatch(r"getelementptr (?:(?:inbounds|nuw|nusw) )*\((.+?), "
                         r"ptr(?: addrspace\(\d+\))? "
                         r"(?:addrspacecast \(.*?\) |@\S+)?,?\s*(.*)\)", text.strip())
        if "getelementptr" not in text:
            return Val((Piece(None, Expr(0), base),))
        if m is None:
            return Val((Piece(None, None, base),), False, "constant GEP expression")
        idx = [int(x) for x in re.findall(r"i\d+ (-?\d+)", m.group(2))]
        off = self._gep_offset(m.group(1), [const(i) for i in idx])
        return self._lift([off], lambda p: Piece(None, p.expr, base), "GEP")

    def _gep_offset(self, ty: str, idx: list[Val]) -> Val:
        try:
            total = self._int2(idx[0], const(type_size(ty, self.structs)),
                               lambda a, b: a.mul(b), "GEP index")
            for ix in idx[1:]:
                c = ix.single()
                if ty.strip().startswith(("%", "{", "<{")):
                    if c is None or not c.is_const:
                        return unknown("struct field index not constant")
                    off, ty = field_offset(ty, c.const, self.structs)
                    total = self._int2(total, const(off), lambda a, b: a + b, "GEP")
                    continue
                elem = _elem_type(ty)
                if elem is None:
                    return unknown(f"GEP into {ty}")
                size = type_size(elem, self.structs)
                total = self._int2(total, ix, lambda a, b, s=size: a + b.scale(s), "GEP")
                ty = elem
            return total
        except TypeParseError as e:
            return unknown(f"type layout: {e}")

    def _instr(self, v: Instr) -> Val:
        op = v.opcode
        ops = v.operands
        if v.type == "i1" and op != "phi":  # a condition used as the integer 0 or 1
            c = self.cond(v)
            if not c.exact:
                return unknown(c.reason or f"condition{self._where(v)}")
            rest = self.space.universe.subtract(c.may)
            pieces = tuple(p for p in (Piece(c.may, Expr(1)), Piece(rest, Expr(0)))
                           if not p.cond.is_empty())
            return Val(pieces)
        if op == "phi":
            if v in self.loop_value:
                return self.loop_value[v]
            return self.phi_pieces(v) if self.phi_pieces else unknown("phi")
        if op in ("sext", "trunc", "freeze", "bitcast", "addrspacecast"):
            return self.value(ops[0])
        if op == "zext":
            return self._zext(v)
        if op == "getelementptr":
            base = self.value(ops[0])
            off = self._gep_offset(v.source_type, [self.value(o) for o in ops[1:]])
            if not off.known:
                whole = self._lift([base], lambda p: Piece(None, None, p.base), "GEP")
                return whole.inexact(off.reason) if whole.known else whole
            return self._lift([base, off], lambda p, q: Piece(
                None, None if p.expr is None else p.expr + q.expr, p.base), "GEP")
        if op == "select":
            return self._select(self.cond(ops[0]), self.value(ops[1]), self.value(ops[2]))
        if op == "alloca":
            return Val((Piece(None, Expr(0), Base("local", v.name)),))
        if op == "call":
            return self._call(v)
        if op in ("load", "atomicrmw", "cmpxchg", "extractvalue"):
            return unknown(f"value loaded from memory{self._where(v)}")
        if op in _BINOPS:
            return _BINOPS[op](self, v, self.value(ops[0]), self.value(ops[1]))
        return unknown(f"{op}{self._where(v)}")

    def _zext(self, v: Instr) -> Val:
        a = self.value(v.operands[0])
        if " nneg " in v.text or not a.known or v.operands[0].type == "i1":
            return a
        bits = int(v.operands[0].type[1:]) if v.operands[0].type[1:].isdigit() else 32

        def f(p: Piece):
            if p.expr is None:
                return None
            neg = self.space.set(f"{p.expr} < 0")
            return Piece(self.space.universe.subtract(neg), p.expr)

        nonneg = self._lift([a], f, "zext")
        wrapped = self._lift([a], lambda p: Piece(self.space.set(f"{p.expr} < 0"),
                                                  p.expr + (1 << bits)), "zext")
        if not nonneg.known or not wrapped.known:
            return unknown("zext")
        pieces = tuple(p for p in (*nonneg.pieces, *wrapped.pieces)
                       if p.cond is None or not p.cond.is_empty())
        return Val(pieces, a.exact, a.reason)

    def _select(self, c: Cond, a: Val, b: Val) -> Val:
        if not a.known:
            return a
        if not b.known:
            return b
        if not c.exact:
            return Val(a.pieces + b.pieces, False, c.reason or "select on an unknown condition")
        notc = self.space.universe.subtract(c.may)
        pa = [Piece(_and(c.may, p.cond), p.expr, p.base) for p in a.pieces]
        pb = [Piece(_and(notc, p.cond), p.expr, p.base) for p in b.pieces]
        pieces = tuple(p for p in pa + pb if not p.cond.is_empty())
        if len(pieces) > MAX_PIECES:
            return unknown("too many cases in select")
        return Val(pieces, a.exact and b.exact, "; ".join(x for x in (a.reason, b.reason) if x))

    def _call(self, v: Instr) -> Val:
        callee = v.callee
        name = callee.name if isinstance(callee, Function) else ""
        if m := _SREG_RE.match(name):
            kind, axis = m.group(1), _AXIS[m.group(2)]
            if kind in ("tid", "ctaid"):
                return const(Expr.var(THREAD_DIMS[axis + (3 if kind == "tid" else 0)]))
            return const((self.binding.block if kind == "ntid" else self.binding.grid)[axis])
        mm = re.match(r"llvm\.(smin|smax|umin|umax)\.i\d+$", name)
        if mm:
            a, b = (self.value(x) for x in v.args)
            pred = {"smin": "slt", "smax": "sgt", "umin": "ult", "umax": "ugt"}[mm.group(1)]
            return self._select(self._icmp(pred, a, b), a, b)
        return unknown(f"result of a call to {name or 'an indirect callee'}{self._where(v)}")

    # conditions -------------------------------------------------------------------------------
    def cond(self, v: Value) -> Cond:
        got = self.cmemo.get(v)
        if got is None:
            got = self._cond(v)
            self.cmemo[v] = got
        return got

    def _cond(self, v: Value) -> Cond:
        sp = self.space
        if isinstance(v, Const) and isinstance(v.value, int):
            return Cond(sp.universe if v.value else sp.empty)
        if not isinstance(v, Instr):
            return Cond(sp.universe, False, f"condition {v.kind}")
        ops = v.operands
        if v.opcode == "icmp":
            if ops[0].type.startswith("ptr"):
                return Cond(sp.universe, False, f"pointer comparison{self._where(v)}")
            pred = v.predicate
            if "samesign" in v.text and pred[0] == "u":
                pred = "s" + pred[1:]
            return self._icmp(pred, self.value(ops[0]), self.value(ops[1]))
        if v.opcode in ("and", "or") or (v.opcode == "select" and _is_bool_const(ops[2], 0)):
            a = self.cond(ops[0])
            b = self.cond(ops[1])
            if v.opcode == "or":
                return Cond(a.may.union(b.may).coalesce(), a.exact and b.exact,
                            a.reason or b.reason)
            return Cond(a.may.intersect(b.may), a.exact and b.exact, a.reason or b.reason)
        if v.opcode == "select" and _is_bool_const(ops[1], 1):
            a, b = self.cond(ops[0]), self.cond(ops[2])
            return Cond(a.may.union(b.may).coalesce(), a.exact and b.exact, a.reason or b.reason)
        if v.opcode == "xor" and (_is_bool_const(ops[1], 1) or _is_bool_const(ops[0], 1)):
            return self.negate(self.cond(ops[0] if _is_bool_const(ops[1], 1) else ops[1]))
        if v.opcode == "select":
            c, a, b = self.cond(ops[0]), self.cond(ops[1]), self.cond(ops[2])
            if not c.exact:
                return Cond(a.may.union(b.may), False, c.reason)
            notc = sp.universe.subtract(c.may)
            return Cond(c.may.intersect(a.may).union(notc.intersect(b.may)).coalesce(),
                        a.exact and b.exact, a.reason or b.reason)
        if v.opcode == "freeze" or (v.opcode == "trunc" and ops[0].type == "i1"):
            return self.cond(ops[0])
        if v.opcode == "trunc":  # the low bit
            x = self.value(ops[0])
            if x.known and all(p.expr is not None for p in x.pieces):
                may = sp.empty
                for p in x.pieces:
                    s = sp.set(f"({p.expr}) mod 2 = 1")
                    may = may.union(s if p.cond is None else s.intersect(p.cond))
                return Cond(may.coalesce(), x.exact, x.reason)
        if v.opcode == "phi" and v not in self.loop_value and self.phi_pieces:
            val = self.phi_pieces(v)
            if val.known and all(p.expr is not None and p.expr.is_const for p in val.pieces):
                may = sp.empty
                for p in val.pieces:
                    if p.expr.const:
                        may = may.union(p.cond if p.cond is not None else sp.universe)
                return Cond(may.coalesce(), val.exact, val.reason)
        return Cond(sp.universe, False, f"condition computed by {v.opcode}{self._where(v)}")

    def negate(self, c: Cond) -> Cond:
        if not c.exact:
            return Cond(self.space.universe, False, c.reason)
        return Cond(self.space.universe.subtract(c.may).coalesce())

    def _icmp(self, pred: str, a: Val, b: Val) -> Cond:
        sp = self.space
        if not a.known or not b.known:
            return Cond(sp.universe, False, a.reason or b.reason)
        may = sp.empty
        for pa in a.pieces:
            for pb in b.pieces:
                if pa.expr is None or pb.expr is None or pa.base != pb.base:
                    return Cond(sp.universe, False, "comparison of unknown values")
                s = sp.set(_rel(pa.expr, pb.expr, pred))
                may = may.union(s.intersect(_and(pa.cond, pb.cond) or sp.universe))
        return Cond(may.coalesce(), a.exact and b.exact, a.reason or b.reason)


def signed(x: int, ty: str) -> int:
    """The signed value of an integer constant of LLVM type `ty` (llvmlite reads them unsigned)."""
    m = re.fullmatch(r"i(\d+)", ty)
    if m:
        bits = int(m.group(1))
        x &= (1 << bits) - 1
        if bits > 1 and x >= 1 << (bits - 1):
            x -= 1 << bits
    return x


def _is_bool_const(v: Value, x: int) -> bool:
    return isinstance(v, Const) and v.type == "i1" and (v.value != 0) == bool(x)


def _pow2(c: Expr | None) -> int | None:
    if c is None or not c.is_const or c.const <= 0 or c.const & (c.const - 1):
        return None
    return c.const.bit_length() - 1


def _binop(f, what: str):
    def run(ev: ValueEval, v: Instr, a: Val, b: Val) -> Val:
        if not a.known or not b.known:
            return a if not a.known else b
        return ev._int2(a, b, f, f"{what}{ev._where(v)}")
    return run


def _div(a: Expr, b: Expr) -> Expr | None:
    return a.floordiv(b.const) if b.is_const and b.const > 0 else None


def _rem(a: Expr, b: Expr) -> Expr | None:
    return a.mod(b.const) if b.is_const and b.const > 0 else None


def _shl(a: Expr, b: Expr) -> Expr | None:
    return a.scale(1 << b.const) if b.is_const and 0 <= b.const < 63 else None


def _shr(a: Expr, b: Expr) -> Expr | None:
    return a.floordiv(1 << b.const) if b.is_const and 0 <= b.const < 63 else None


def _and_mask(a: Expr, b: Expr) -> Expr | None:
    if a.is_const and b.is_const:
        return Expr(a.const & b.const)
    if a.is_const:
        a, b = b, a
    if not b.is_const:
        return None
    m = b.const
    if m < 0:  # ~(2^k - 1): clear the low k bits
        low = (~m) + 1
        k = _pow2(Expr(low))
        return None if k is None else a - a.mod(low)
    hi = m + 1
    if hi & (hi - 1) == 0:  # 2^k - 1
        return a.mod(hi)
    low = m & -m
    top = m + low
    if top & (top - 1) == 0:  # contiguous bits b..k-1 = (a mod 2^k) - (a mod 2^b)
        return a.mod(top) - a.mod(low)
    return None


def _xor(a: Expr, b: Expr) -> Expr | None:
    if a.is_const and b.is_const:
        return Expr(a.const ^ b.const)
    return -a - 1 if b.is_const and b.const == -1 else None  # ~a


def _or(ev: ValueEval, v: Instr, a: Val, b: Val) -> Val:
    if " disjoint " in v.text:
        return ev._int2(a, b, lambda x, y: x + y, "or")
    return ev._int2(a, b, lambda x, y: Expr(x.const | y.const) if x.is_const and y.is_const
                    else None, f"bitwise or{ev._where(v)}")


_BINOPS = {
    "add": _binop(lambda a, b: a + b, "add"),
    "sub": _binop(lambda a, b: a - b, "sub"),
    "mul": _binop(lambda a, b: a.mul(b), "product of two variables"),
    "shl": _binop(_shl, "shift by a variable"),
    "lshr": _binop(_shr, "shift by a variable"),
    "ashr": _binop(_shr, "shift by a variable"),
    "udiv": _binop(_div, "division by a variable"),
    "sdiv": _binop(_div, "division by a variable"),
    "urem": _binop(_rem, "remainder by a variable"),
    "srem": _binop(_rem, "remainder by a variable"),
    "and": _binop(_and_mask, "bitwise and with a non-mask"),
    "or": _or,
    "xor": _binop(lambda a, b: _xor(a, b) if b.is_const else _xor(b, a), "bitwise xor"),
}
