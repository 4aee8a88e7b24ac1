"""Host loops around GPU work: induction variable, trip count, and what each header phi holds
in iteration k (constant, affine in k, or rotating through a cycle of pointers)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sirius.analysis.cfg import NaturalLoop
from sirius.analysis.expr import Expr
from sirius.analysis.host.model import DevRef, Rotating
from sirius.analysis.host.ops import compare_ints
from sirius.analysis.host.values import AV, DevPtr, HostPtr, Int, Unknown, int_bits, offset_addr
from sirius.analysis.irview import Block, Const, Instr, Value

if TYPE_CHECKING:
    from sirius.analysis.host.extract import Frame, HostInterpreter

MAX_ENUMERATED_TRIPS = 1_000_000
_NEGATE = {"eq": "ne", "ne": "eq", "slt": "sge", "sge": "slt", "sgt": "sle", "sle": "sgt",
           "ult": "uge", "uge": "ult", "ugt": "ule", "ule": "ugt"}
_W = "\0w"  # the iteration value while solving an exit test; never a real name


@dataclass
class LoopShape:
    var: str
    lo: Expr
    hi: Expr | None
    step: int
    trips: int | None
    range: tuple[int, int]
    last: Expr
    header_values: dict[Value, AV]
    inside: dict[Block, Block]
    exiting: Block
    exiting_instr: Instr
    exit_target: Block


def _step_of(phi: Instr, latch_val: Value) -> int | None:
    if not isinstance(latch_val, Instr) or latch_val.opcode not in ("add", "sub"):
        return None
    a, b = latch_val.operands
    if a is phi and isinstance(b, Const) and isinstance(b.value, int):
        return b.value if latch_val.opcode == "add" else -b.value
    if b is phi and isinstance(a, Const) and isinstance(a.value, int) and latch_val.opcode == "add":
        return a.value
    return None


def analyse_loop(interp: HostInterpreter, frame: Frame, lp: NaturalLoop,
                 preds: frozenset[Block]) -> LoopShape:
    cfg = frame.cfg
    if len(lp.latches) != 1:
        raise interp.error("a host loop around GPU work has several back edges (continue "
                           "statements); sirius cannot model it", lp.header.terminator)
    latch = lp.latches[0]
    exits = [(e, t) for e, t in lp.exits if not cfg.dead_end(t)]
    exiting = list(dict.fromkeys(e for e, _ in exits))
    if not exiting:
        raise interp.error("a host loop around GPU work never exits", lp.header.terminator)
    if len(exiting) > 1:
        extra = [e for e in exiting if e is not latch and e is not lp.header] or exiting[1:]
        raise interp.error("a host loop around GPU work has several exits (a break or return "
                           "inside the loop, here); sirius cannot model it",
                           extra[0].terminator,
                           f"the loop starts at {interp.loc(lp.header.terminator) or '?'}")
    E = exiting[0]
    term = E.terminator
    succs = term.successors()
    if term.opcode != "br" or len(succs) != 2:
        raise interp.error("a host loop around GPU work exits through a switch", term)
    stay_when = succs[0] in lp.blocks
    exit_target = succs[1] if stay_when else succs[0]
    inside = {E: succs[0] if stay_when else succs[1]}

    phis = [i for i in lp.header.instrs if i.opcode == "phi"]
    init: dict[Instr, AV] = {}
    latch_val: dict[Instr, Value] = {}
    for phi in phis:
        vals = [interp.val(frame, v) for v, b in zip(phi.operands, phi.incoming, strict=True)
                if b in preds]
        init[phi] = vals[0] if vals and all(v == vals[0] for v in vals) else Unknown(
            "enters the loop with a value sirius does not know")
        latch_val[phi] = next(v for v, b in zip(phi.operands, phi.incoming, strict=True)
                              if b is latch)
    ivs = [(phi, s) for phi in phis if (s := _step_of(phi, latch_val[phi])) and
           isinstance(init[phi], Int)]
    # The latch test runs after the body; this also covers single-block loops (header == latch).
    tested = "bottom" if E is latch else "top" if E is lp.header else "middle"
    counted = None
    if tested != "middle" and isinstance(term.operands[0], Instr) and \
            term.operands[0].opcode == "icmp":
        for phi, step in ivs:
            counted = _count(interp, frame, lp, term.operands[0], phi, step, init[phi],
                             stay_when, tested)
            if counted is not None:
                iv_phi = phi
                break
    loc_ins = term
    if counted is not None:
        lo, hi, step, trips = counted
        var = _unique(interp, _iv_name(frame, lp, iv_phi))
        w = Expr.var(var)
        k = (w - lo) if step == 1 else (w - lo).floordiv(step) if step > 0 else \
            (lo - w).floordiv(-step)
        if trips is not None:
            last = lo + (trips - 1) * step
        elif step > 0:
            last = lo + (hi - lo - 1).floordiv(step).scale(step)
        else:
            last = lo - (lo - hi - 1).floordiv(-step).scale(-step)
        rng = _range(interp, lo, last)
    else:
        if tested == "middle":
            raise interp.error("a host loop around GPU work exits in the middle of its body; "
                               "sirius cannot model it", term)
        interp.n_opaque += 1
        var = f"_loop{interp.n_opaque}"
        lo, hi, step, trips = Expr(0), None, 1, None
        w = Expr.var(var)
        k = w
        last = Expr.var(f"{var}_last")
        rng = (0, 2**31 - 1)
        iv_phi = None

    values: dict[Value, AV] = {}
    for phi in phis:
        lv = latch_val[phi]
        a = init[phi]
        if phi is iv_phi:
            values[phi] = Int(w, int_bits(phi.type))
        elif lv is phi or (not (isinstance(lv, Instr) and lv.block in lp.blocks)
                           and interp.val(frame, lv) == a):
            values[phi] = a
        elif (s := _step_of(phi, lv)) is not None and isinstance(a, Int):
            values[phi] = Int(a.e + k.scale(s), a.bits)
        elif (d := _gep_step(interp, phi, lv)) is not None and isinstance(a, DevPtr | HostPtr):
            delta = k.scale(d)
            values[phi] = DevPtr(offset_addr(a.addr, delta)) if isinstance(a, DevPtr) else \
                HostPtr(a.region, a.offset + delta)
    _rotations(phis, latch_val, init, k, values)
    for phi in phis:
        values.setdefault(phi, Unknown(
            f"'{frame.fn.var_names.get(phi.name) or _clean(phi.name)}' changes from one "
            "iteration to the next in a way sirius cannot follow", interp.loc(loc_ins)))
    return LoopShape(var, lo, hi, step, trips, rng, last, values, inside, E, term, exit_target)


def _iv_name(frame, lp: NaturalLoop, phi: Instr) -> str:
    """The source name of an induction variable; LLVM may have widened it to i64 and put the
    debug record on a truncation of the phi."""
    names = frame.fn.var_names
    if phi.name in names:
        return _identifier(names[phi.name])
    for b in lp.blocks:
        for ins in b.instrs:
            if ins.opcode in ("trunc", "zext", "sext") and ins.operands[0] is phi and \
                    ins.name in names:
                return _identifier(names[ins.name])
    return _identifier(_clean(phi.name))


def _identifier(name: str) -> str:
    name = re.sub(r"\W", "_", name.split(".")[-1] if "." in name else name)
    return name if name and not name[0].isdigit() else f"v{name}"


def _clean(name: str) -> str:
    from sirius.analysis.host.cudaapi import clean_name

    return clean_name(name) or "i"


def _unique(interp: HostInterpreter, name: str) -> str:
    out, n = name, 1
    while out in interp.loop_vars:
        n += 1
        out = f"{name}_{n}"
    return out


def _range(interp: HostInterpreter, lo: Expr, last: Expr) -> tuple[int, int]:
    b1, b2 = lo.bounds(interp.ranges), last.bounds(interp.ranges)
    if b1 is None or b2 is None:
        return (-(2**31), 2**31 - 1)
    return (min(b1[0], b2[0]), max(b1[1], b2[1]))


def _gep_step(interp: HostInterpreter, phi: Instr, lv: Value) -> int | None:
    if isinstance(lv, Instr) and lv.opcode == "getelementptr" and lv.operands[0] is phi and \
            len(lv.operands) == 2 and isinstance(lv.operands[1], Const):
        try:
            return int(lv.operands[1].value) * interp.types.size(lv.source_type)
        except (ValueError, TypeError):
            return None
    return None


def _rotations(phis, latch_val, init, k: Expr, values: dict) -> None:
    """Pointers that trade places every iteration (ping-pong buffers) form cycles of phis."""
    sigma = {p: latch_val[p] for p in phis if latch_val[p] in phis and latch_val[p] is not p}
    done: set = set()
    for start in sigma:
        if start in done:
            continue
        cycle = [start]
        while (nxt := sigma.get(cycle[-1])) is not None and nxt is not start and nxt not in cycle:
            cycle.append(nxt)
        if sigma.get(cycle[-1]) is not start:
            continue
        done.update(cycle)
        refs = [init[p].addr if isinstance(init[p], DevPtr) else None for p in cycle]
        if any(not isinstance(r, DevRef) for r in refs):
            continue
        m = len(cycle)
        for i, p in enumerate(cycle):
            choices = tuple(refs[(i + j) % m] for j in range(m))
            values[p] = DevPtr(Rotating(choices, k.mod(m)))


def _sym(interp, frame, lp, v: Value, phi: Instr, step: int, depth: int = 0) -> Expr | None:
    """`v` as an expression in the iteration value of `phi` (the name _W)."""
    if v is phi:
        return Expr.var(_W)
    if depth > 8:
        return None
    if isinstance(v, Const) and isinstance(v.value, int):
        return Expr(v.value)
    if not (isinstance(v, Instr) and v.block in lp.blocks):
        av = interp.val(frame, v)
        return av.e if isinstance(av, Int) else None
    if v.opcode in ("sext", "zext", "trunc"):
        return _sym(interp, frame, lp, v.operands[0], phi, step, depth + 1)
    if v.opcode in ("add", "sub", "mul", "shl"):
        a = _sym(interp, frame, lp, v.operands[0], phi, step, depth + 1)
        b = _sym(interp, frame, lp, v.operands[1], phi, step, depth + 1)
        if a is None or b is None:
            return None
        if v.opcode == "add":
            return a + b
        if v.opcode == "sub":
            return a - b
        if v.opcode == "mul":
            return a.mul(b)
        return a.scale(1 << b.const) if b.is_const else None
    return None


def _count(interp, frame, lp, cmp: Instr, phi: Instr, step: int, init: Int, stay_when: bool,
           tested: str):
    lhs = _sym(interp, frame, lp, cmp.operands[0], phi, step)
    rhs = _sym(interp, frame, lp, cmp.operands[1], phi, step)
    if lhs is None or rhs is None:
        return None
    d = lhs - rhs
    if _W not in d.variables():
        return None
    pred = cmp.predicate if stay_when else _NEGATE[cmp.predicate]
    bits = int_bits(cmp.operands[0].type)
    lo = init.e
    if lo.is_const and lhs.variables() <= {_W} and rhs.variables() <= {_W}:
        def stays(wv: int) -> bool:
            env = {_W: wv}
            return compare_ints(pred, lhs.evaluate(env), rhs.evaluate(env), bits)

        n, wv = (0, lo.const) if tested == "top" else (1, lo.const)
        while stays(wv):
            n += 1
            wv += step
            if n > MAX_ENUMERATED_TRIPS:
                return None
        if tested == "top" and n == 0:
            return lo, lo, step, 0
        return lo, lo + n * step, step, n
    # Symbolic bounds: "iteration w runs iff d(w) pred 0".
    if tested == "bottom":
        d = d.substitute({_W: Expr.var(_W) - step})
    coeff = dict(d.terms).get(_W, 0)
    rest = d - Expr.var(_W).scale(coeff)
    if pred.startswith("u"):
        pred = "s" + pred[1:]  # only sound when both sides are non-negative: checked below
        for side in (lhs, rhs):
            b = side.substitute({_W: lo}).bounds(interp.ranges)
            if b is None or b[0] < 0:
                return None
    hi = _solve(pred, coeff, rest, step)
    if hi is None:
        return None
    gap = (hi - lo) if step > 0 else (lo - hi)
    b = gap.bounds(interp.ranges)
    if b is None or b[0] < (1 if tested == "bottom" else 0):
        return None
    return lo, hi, step, None


def _solve(pred: str, a: int, r: Expr, step: int) -> Expr | None:
    """The exclusive bound `hi` such that `a*w + r pred 0` holds exactly for the iterations."""
    if step > 0:
        table = {("slt", 1): -r, ("sle", 1): -r + 1, ("sgt", -1): r, ("sge", -1): r + 1}
    else:
        table = {("sgt", 1): -r, ("sge", 1): -r - 1, ("slt", -1): r, ("sle", -1): r - 1}
    if (pred, a) in table:
        return table[(pred, a)]
    if pred == "ne" and abs(step) == 1 and a in (1, -1):
        return -r if a == 1 else r
    return None


def carried_values(holders: dict, init: dict, end: dict, shape: LoopShape) -> dict:
    """Values of loop-carried host variables at the start of iteration `shape.var`, from what one
    probe iteration left in them: unchanged, a constant increment, or a rotation of pointers."""
    lo, step = shape.lo, shape.step
    w = Expr.var(shape.var)
    k = (w - lo) if step == 1 else w if shape.hi is None else (w - lo).floordiv(step) \
        if step > 0 else (lo - w).floordiv(-step)
    name_of = {}
    for c, h in holders.items():
        name_of[c] = h.addr.buffer if isinstance(h, DevPtr) else next(iter(h.e.variables()))
    by_name = {n: c for c, n in name_of.items()}
    out: dict = {}
    sigma: dict = {}
    for c, h in holders.items():
        e = end[c]
        mine = name_of[c]
        if isinstance(h, DevPtr) and isinstance(e, DevPtr) and isinstance(e.addr, DevRef) \
                and e.addr.buffer in by_name:
            delta = e.addr.offset
            src = by_name[e.addr.buffer]
            if src is c and delta.is_const:
                out[c] = DevPtr(offset_addr(init[c].addr, k.scale(delta.const)))
            elif delta == Expr(0):
                sigma[c] = src
        elif isinstance(h, Int) and isinstance(e, Int) and mine in e.e.variables():
            delta = e.e - Expr.var(mine)
            if delta.is_const:
                out[c] = Int(init[c].e + k.scale(delta.const), init[c].bits)
        elif not (isinstance(e, DevPtr | Int) and _mentions_holder(e, by_name)) and e == init[c]:
            out[c] = init[c]
    seen: set = set()
    for start in sigma:
        if start in seen:
            continue
        cycle = [start]
        while (nxt := sigma.get(cycle[-1])) is not None and nxt is not start and nxt not in cycle:
            cycle.append(nxt)
        if sigma.get(cycle[-1]) is not start:
            continue
        seen.update(cycle)
        m = len(cycle)
        refs = [init[c].addr for c in cycle]
        for i, c in enumerate(cycle):
            out[c] = DevPtr(Rotating(tuple(refs[(i + j) % m] for j in range(m)), k.mod(m)))
    return out


def _mentions_holder(v: AV, by_name: dict) -> bool:
    if isinstance(v, Int):
        return bool(v.e.variables() & set(by_name))
    return isinstance(v, DevPtr) and isinstance(v.addr, DevRef) and v.addr.buffer in by_name
