"""Affine expressions over the LLVM values of a kernel, for one launch configuration.

`ValueEval` gives every integer and pointer value of a kernel a `Val` (kernel/pieces.py:
quasi-affine pieces over the thread ids, loop dimensions and host loop variables) and every i1
value a `Cond` (sirius.analysis.kernel.conditions). Scalar parameters take the launch's values
(`Binding`); one the host model does not know is an isl parameter `_p_<name>`. Shifts, masks,
`udiv`/`urem`/`sdiv`/`srem` by constants, `sext`/`zext`/`trunc`, GEPs over arrays, structs and
vectors, `select`s, `smin`/`smax` and phis (merges become pieces; loop headers are bound by
sirius.analysis.kernel.domains) are exact.

Assumptions, written down: 32- and 64-bit index arithmetic does not wrap (`sext` is the
identity, `trunc` to 32 bits too). Narrower arithmetic (LLVM narrows `x % 9 / 3` to 8 bits) is
modelled with its wrap-around, `((e + 2^(n-1)) mod 2^n) - 2^(n-1)`, unless the thread-id bounds
prove it fits; an unsigned division, remainder, shift or `zext` of a possibly negative value is
split into the non-negative piece and the piece `e + 2^n`, C's truncating `sdiv`/`srem` into
signs. Each is exact.
"""

from __future__ import annotations

import re
from itertools import product
from math import prod

import islpy as isl

from sirius.analysis.expr import Expr
from sirius.analysis.irtypes import TypeParseError, field_offset, type_size
from sirius.analysis.irview import Argument, Const, ConstExpr, Function, Instr, Value
from sirius.analysis.kernel.conditions import Conditions
from sirius.analysis.kernel.intops import (
    and_mask,
    bit_width,
    div,
    low_zero_bits,
    or_disjoint,
    rem,
    shl,
    shr,
    signed,
    xor,
)
from sirius.analysis.kernel.pieces import (
    ANY,
    MAX_PIECES,
    THREAD_DIMS,
    Base,
    Binding,
    Cond,
    Piece,
    Space,
    Val,
    collapse,
    const,
    loaded,
    meet,
    same,
    space_of_global,
    unknown,
)

__all__ = ["ANY", "MAX_PIECES", "THREAD_DIMS", "Base", "Binding", "Cond", "Piece", "Space", "Val",
           "ValueEval", "collapse", "const", "loaded", "same", "signed", "space_of_global",
           "unknown"]

_SREG_RE = re.compile(r"llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid|ntid|nctaid)\.([xyz])$")
_AXIS = {"x": 0, "y": 1, "z": 2}


def _elem_type(ty: str) -> str | None:
    m = re.fullmatch(r"[\[<]\d+ x (.+)[\]>]", ty.strip())
    return m.group(1) if m else None


class ValueEval(Conditions):
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
        sizes = (*binding.grid, *binding.block)
        self.ranges = {d: (0, e.const - 1) for d, e in zip(THREAD_DIMS, sizes, strict=True)
                       if e.is_const}
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
            combos = [(meet(c, p.cond), ps + [p]) for c, ps in combos for p in v.pieces]
            combos = [(c, ps) for c, ps in combos if c is None or not c.is_empty()]
            if len(combos) > MAX_PIECES:
                return collapse([v for v in vals if v.known], f"too many cases in {what}")
        out = []
        for c, ps in combos:
            r = f(*ps)
            if r is None:
                return unknown(what)
            out.append(r if isinstance(r, Piece) else Piece(c, r))
            if isinstance(r, Piece) and c is not None:
                out[-1] = Piece(meet(c, r.cond), r.expr, r.base)
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
            if s is not None:
                return const(s)
            name = self.param_names[v.index]
            if name not in self.space.params:  # a float or bool parameter
                return unknown(f"parameter {name[3:]} of type {v.type}")
            return const(Expr.var(name))
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
        m = re.fullmatch(r"(?:ptr(?: addrspace\(\d+\))? )?"
                         r"getelementptr (?:(?:inbounds|nuw|nusw) )*\((.+?), "
                         r"ptr(?: addrspace\(\d+\))? "
                         r"(?:addrspacecast \(ptr(?: addrspace\(\d+\))? @\S+ to ptr"
                         r"(?: addrspace\(\d+\))?\)|@\S+)?,?\s*(.*)\)", text.strip())
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
        if op in ("sext", "freeze", "bitcast", "addrspacecast"):
            return self.value(ops[0])
        if op == "trunc":  # LLVM narrows index arithmetic to i8/i16: model the wrap-around
            a = self.value(ops[0])
            return a if " nuw " in v.text or " nsw " in v.text else self.wrap(a, bit_width(v.type))
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
        if op == "load" and v.type.startswith("ptr"):
            return self.loaded_pointer(v)
        if op in ("load", "atomicrmw", "cmpxchg", "extractvalue"):
            return unknown(f"value loaded from memory{self._where(v)}")
        if op in _BINOPS:
            a, b = self.value(ops[0]), self.value(ops[1])
            bits = bit_width(v.type)
            if op in _UNSIGNED:  # the dividend as the unsigned value of its bits
                a = self.by_sign(a, lambda e: e, lambda e: e + (1 << bits), op)
            out = _BINOPS[op](self, v, a, b)
            if op in _WRAPPING and bits < 32 and " nuw " not in v.text \
                    and " nsw " not in v.text:
                out = self.wrap(out, bits)
            return out
        return unknown(f"{op}{self._where(v)}")

    def loaded_pointer(self, v: Instr) -> Val:
        """A pointer read from memory: somewhere in what may have been stored where it was
        read (the base `loaded`, resolved against the program's points-to facts), offset
        unknown."""
        addr = self.value(v.operands[0])
        srcs = [p.base or ANY for p in addr.pieces] if addr.known else [ANY]
        return Val((Piece(None, None, loaded(srcs)),), False,
                   f"pointer loaded from memory{self._where(v)}")

    def _zext(self, v: Instr) -> Val:
        a = self.value(v.operands[0])
        if " nneg " in v.text or not a.known or v.operands[0].type == "i1":
            return a
        bits = bit_width(v.operands[0].type)
        return self.by_sign(a, lambda e: e, lambda e: e + (1 << bits), "zext")

    def by_sign(self, a: Val, nonneg, neg, what: str) -> Val:
        """Each piece of `a` mapped by nonneg(e) where its expression e >= 0 and by neg(e)
        where e < 0 (a side the thread-id bounds rule out is left out)."""
        if not a.known:
            return a
        sp = self.space
        out: list[Piece] = []
        for p in a.pieces:
            if p.expr is None:
                return unknown(what)
            b = p.expr.bounds(self.ranges)
            sides = []
            if b is None or b[1] >= 0:
                sides.append((sp.set(f"{p.expr} >= 0") if b is None or b[0] < 0 else None,
                              nonneg(p.expr)))
            if b is None or b[0] < 0:
                sides.append((sp.set(f"{p.expr} < 0") if b is None or b[1] >= 0 else None,
                              neg(p.expr)))
            for cond, e in sides:
                if e is None:
                    return unknown(what)
                c = meet(cond, p.cond)
                if c is None or not c.is_empty():
                    out.append(Piece(c, e, p.base))
        if len(out) > MAX_PIECES:
            return unknown(f"too many cases in {what}")
        return Val(tuple(out), a.exact, a.reason)

    def wrap(self, a: Val, bits: int) -> Val:
        """`a` as a signed `bits`-bit integer: unchanged where it provably fits, else
        ((e + 2^(bits-1)) mod 2^bits) - 2^(bits-1) (exact, quasi-affine)."""
        if not a.known or bits >= 32:
            return a
        half = 1 << (bits - 1)
        out = []
        for p in a.pieces:
            e = p.expr
            b = e.bounds(self.ranges) if e is not None else None
            if e is not None and not (b is not None and -half <= b[0] and b[1] < half):
                e = (e + half).mod(2 * half) - half
            out.append(Piece(p.cond, e, p.base))
        return Val(tuple(out), a.exact, a.reason)

    def _select(self, c: Cond, a: Val, b: Val) -> Val:
        if not a.known:
            return a
        if not b.known:
            return b
        if not c.exact:
            return Val(a.pieces + b.pieces, False, c.reason or "select on an unknown condition")
        notc = self.space.universe.subtract(c.may)
        pa = [Piece(meet(c.may, p.cond), p.expr, p.base) for p in a.pieces]
        pb = [Piece(meet(notc, p.cond), p.expr, p.base) for p in b.pieces]
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


def _binop(f, what: str):
    def run(ev: ValueEval, v: Instr, a: Val, b: Val) -> Val:
        if not a.known or not b.known:
            return a if not a.known else b
        return ev._int2(a, b, f, f"{what}{ev._where(v)}")
    return run


OR_POINTS = 4096  # thread-id points an `or` may be checked on, one by one


def _no_common_bits(x: Expr, y: Expr, ranges: dict[str, tuple[int, int]]) -> bool:
    """Whether x & y is 0 at every point of the launch's thread-id box, checked point by
    point: only where x and y depend on thread and block ids alone (not on loop variables or
    host values) and the box has at most OR_POINTS points."""
    names = sorted((x + y).variables())
    if not set(names) <= ranges.keys() or \
            prod(ranges[n][1] - ranges[n][0] + 1 for n in names) > OR_POINTS:
        return False
    for point in product(*(range(ranges[n][0], ranges[n][1] + 1) for n in names)):
        env = dict(zip(names, point, strict=True))
        if x.evaluate(env) & y.evaluate(env):
            return False
    return True


def _or(ev: ValueEval, v: Instr, a: Val, b: Val) -> Val:
    if " disjoint " in v.text:
        return ev._int2(a, b, lambda x, y: x + y, "or")

    def disjoint(x: Expr, y: Expr) -> Expr | None:
        """x | y as x + y where their set bits cannot meet: a constant below the other's
        known zero low bits (`or_disjoint`), a value that the launch's thread ranges keep in
        [0, 2^k) while the other is a multiple of 2^k, or no common bit at any thread (an `or`
        whose `disjoint` flag LLVM lost, e.g. after sinking the identical tails of a horizontal
        kernel's members); else x | c as x + c - (x & c) for a constant c."""
        got = or_disjoint(x, y)
        if got is not None:
            return got
        for p, q in ((x, y), (y, x)):
            r = q.bounds(ev.ranges)
            if r is not None and r[0] >= 0 and r[1] < (1 << min(low_zero_bits(p), 62)):
                return x + y
        if _no_common_bits(x, y, ev.ranges):
            return x + y
        if x.is_const or y.is_const:  # x | c = x + c - (x & c), the mask as mods
            k, c = (y, x) if x.is_const else (x, y)
            common = and_mask(k, c)
            return None if common is None else k + c - common
        return None

    return ev._int2(a, b, disjoint, f"bitwise or{ev._where(v)}")


def _signed_div(ev: ValueEval, v: Instr, a: Val, b: Val, op: str) -> Val:
    """C's truncating division and remainder by a positive constant."""
    d = b.single()
    if d is None or not d.is_const or d.const <= 0:
        return unknown(f"{op} by a variable{ev._where(v)}")
    k = d.const
    if op == "sdiv":
        return ev.by_sign(a, lambda e: e.floordiv(k), lambda e: (-e).floordiv(k).scale(-1), op)
    return ev.by_sign(a, lambda e: e.mod(k), lambda e: (-e).mod(k).scale(-1), op)


_UNSIGNED = ("udiv", "urem", "lshr")
_WRAPPING = ("add", "sub", "mul", "shl")
_BINOPS = {
    "add": _binop(lambda a, b: a + b, "add"),
    "sub": _binop(lambda a, b: a - b, "sub"),
    "mul": _binop(lambda a, b: a.mul(b), "product of two variables"),
    "shl": _binop(shl, "shift by a variable"),
    "lshr": _binop(shr, "shift by a variable"),
    "ashr": _binop(shr, "shift by a variable"),
    "udiv": _binop(div, "division by a variable"),
    "sdiv": lambda ev, v, a, b: _signed_div(ev, v, a, b, "sdiv"),
    "urem": _binop(rem, "remainder by a variable"),
    "srem": lambda ev, v, a, b: _signed_div(ev, v, a, b, "srem"),
    "and": _binop(and_mask, "bitwise and with a non-mask"),
    "or": _or,
    "xor": _binop(lambda a, b: xor(a, b) if b.is_const else xor(b, a), "bitwise xor"),
}
