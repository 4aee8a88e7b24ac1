"""Conditions of a kernel's i1 values as isl sets (where they may be true), for the branches
that restrict the domains of accesses and for selects."""

from __future__ import annotations

from sirius.analysis.expr import Expr
from sirius.analysis.irview import Const, Instr, Value
from sirius.analysis.kernel.intops import signed
from sirius.analysis.kernel.pieces import Cond, Val, const, meet

_SWAP = {"ult": "ugt", "ugt": "ult", "ule": "uge", "uge": "ule", "slt": "sgt", "sgt": "slt",
         "sle": "sge", "sge": "sle"}


def _rel(a: Expr, b: Expr, pred: str) -> str:
    plain = {"eq": "=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
    if pred in plain:
        return f"{a} {plain[pred]} {b}"
    if pred == "ne":
        return f"({a} < {b} or {a} > {b})"
    if pred in ("ugt", "uge"):
        a, b, pred = b, a, {"ugt": "ult", "uge": "ule"}[pred]
    op = "<" if pred == "ult" else "<="
    # unsigned order on the 32/64-bit patterns of signed values: negatives are the largest
    return (f"(({a} >= 0 and {b} < 0) or ((({a} >= 0 and {b} >= 0) or ({a} < 0 and {b} < 0)) "
            f"and {a} {op} {b}))")


def _is_bool_const(v: Value, x: int) -> bool:
    return isinstance(v, Const) and v.type == "i1" and (v.value != 0) == bool(x)


class Conditions:
    """The condition half of ValueEval (kernel/affine.py): i1 values as `Cond`s. Uses the
    evaluator's `space`, `value`, `loop_value`, `phi_pieces`, `cmemo` and `_where`."""

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
            unsigned = "u" + pred[1:] if "samesign" in v.text and pred[0] == "s" else pred
            bounded = self._or_bound(ops, unsigned)
            if bounded is not None:
                return bounded
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
        if v.opcode == "phi" and (v in self.loop_value or self.phi_pieces):
            val = self.loop_value[v] if v in self.loop_value else self.phi_pieces(v)
            if val.known and all(p.expr is not None and p.expr.is_const for p in val.pieces):
                may = sp.empty
                for p in val.pieces:
                    if p.expr.const:
                        may = may.union(p.cond if p.cond is not None else sp.universe)
                return Cond(may.coalesce(), val.exact, val.reason)
        return Cond(sp.universe, False, f"condition computed by {v.opcode}{self._where(v)}")

    def _or_bound(self, ops: list[Value], pred: str) -> Cond | None:
        """Comparisons of `a | b` with a power of two (LLVM's form of `a < 4 && b < 4`):
        `(a | b) <u 2^k` is `a <u 2^k and b <u 2^k`, and `(a | b) == 0` is `a == 0 and b == 0`,
        whatever a and b."""
        x, z = ops
        if isinstance(x, Const):
            x, z = z, x
            pred = _SWAP.get(pred, pred)
        if not (isinstance(z, Const) and isinstance(x, Instr) and x.opcode == "or"
                and " disjoint " not in x.text):
            return None
        c = signed(z.value, z.type)
        if pred in ("eq", "ne") and c == 0:
            inner, bound, negate = "eq", 0, pred == "ne"
        elif pred in ("ult", "uge") and c > 0 and c & (c - 1) == 0:
            inner, bound, negate = "ult", c, pred == "uge"
        elif pred in ("ule", "ugt") and c >= 0 and (c + 1) & c == 0:
            inner, bound, negate = "ule", c, pred == "ugt"
        else:
            return None
        both = [self._icmp(inner, self.value(o), const(bound)) for o in x.operands]
        cond = Cond(both[0].may.intersect(both[1].may), both[0].exact and both[1].exact,
                    both[0].reason or both[1].reason)
        return self.negate(cond) if negate else cond

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
                may = may.union(s.intersect(meet(pa.cond, pb.cond) or sp.universe))
        return Cond(may.coalesce(), a.exact and b.exact, a.reason or b.reason)
