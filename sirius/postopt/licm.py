"""`licm`: loop-invariant code motion after normalisation, with a cost model (issue 14 item 7;
the seed paper `licm-tvm-ir`, ../shared/papers/licm-tvm-ir.zh.txt).

LLVM's own LICM (in every `llvm-opt` round) hoists what is invariant as the code is written. The
paper's point is that the way an expression is written hides invariants: `(i + a) + b` inside a
loop over `i` computes `a + b` again in every iteration, where `i + (a + b)` would let LICM hoist
it. This pass normalises the loops of each function and hoists what the normalisation makes
invariant itself, to the preheader of the outermost loop it is invariant in (it runs no LLVM
pass; LLVM 22's own LICM already regroups simple `add` chains, and InstCombine merges many
selects, so on the corpus the address splits are what remain):

- **Reassociation by loop depth.** A tree of one associative integer operation (`add`, `mul`,
  `and`, `or`, `xor`; interior nodes used once) inside a loop is rebuilt with its leaves sorted
  by rank (0: arguments, constants and values defined outside every loop; k: defined in the
  k-th loop of the nest that contains the root), lowest first, so that every prefix that is
  invariant in some loop is one value, hoisted to that loop's preheader.
- **Address splitting.** `getelementptr T, ptr %p, zext (I + V)` with `%p` and `I` invariant and
  `V` not becomes `getelementptr T, (getelementptr T, ptr %p, zext I), zext V`: the inner address
  is hoisted. Only where every `add` of the index is `nuw` (then `zext` distributes over it and
  the inner address lies between `%p` and the original one, so the GEP's flags still hold).
- **Conditions with equal results merged.** `select c1, x, (select c2, x, y)` becomes
  `select (c1 or c2), x, y` (a poison-safe `select c1, true, c2`), and `select c1, (select c2,
  x, y), y` becomes `select (c1 and c2), x, y`, where `c1` and `c2` are both invariant: the
  merged condition is hoisted and one select per iteration is left.

**Cost model.** A rewrite is made only where it removes at least `threshold` units of work per
iteration of its loop (the paper's cost function: `add`, `and`, `or`, `xor`, `select`,
`zext` 1 each; `mul` 2), counting the operations of the tree that run in the innermost loop
before and after; over the loop's constant trip count (where it has one) that saving must
exceed the operations hoisted before the loop; and only an instruction that runs in every
iteration (its block dominates the loop's latches) is rewritten. A loop with a constant trip
count of at most `small_trip` iterations is left as it is: the backend unrolls it and folds the
invariant arithmetic itself, and a hoisted value would only hold a register across it (the
paper's third point).

**Soundness.** Reassociation drops `nsw` (a regrouped partial sum may overflow where the
original's did not) and keeps `nuw` on `add` only where every node of the tree had it (then
every partial sum is at most the total); `mul`, `and`, `or`, `xor` lose their flags (`or
disjoint` included). No memory operation moves: only integer arithmetic, address computations
(no loads) and select conditions go to a preheader, and only when every value they use is
defined in a block that dominates it; a loop without a preheader (LLVM's simplified form) is
left alone. The pass runs after the last `llvm-opt` round, whose Reassociate pass would undo
the grouping (it ranks values by block order, not by loop).

Refused: a module for another target (as `llvm-opt`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from sirius.analysis.cfg import FunctionCFG, NaturalLoop
from sirius.analysis.irview import Block, Function, Instr, Value, build_view
from sirius.postopt.base import (
    HostRewrite,
    ModulePass,
    PassContext,
    PassError,
    PassInput,
    require_device,
)
from sirius.postopt.kernel_text import split_top
from sirius.postopt.loop_fuse import functions_of

__all__ = ["Licm"]

_ASSOC = {"add": 1, "mul": 2, "and": 1, "or": 1, "xor": 1}  # cost of one operation
_INT = re.compile(r"i\d+$")
_NAME = r'%(?:[-\w.$]+|"[^"]+")'
_GEP = re.compile(rf"^(\s*{_NAME} = getelementptr )((?:inbounds |nuw |nusw )*)(.+?), "
                  rf"ptr ({_NAME}), i64 ({_NAME})((?:,.*)?)$")


@dataclass
class _Loops:
    """The loop nest of one function: each block's loops (innermost first) and the small ones."""

    cfg: FunctionCFG
    chain: dict[Block, list[NaturalLoop]] = field(default_factory=dict)
    trips: dict[NaturalLoop, int | None] = field(default_factory=dict)  # constant trip counts
    small: set[NaturalLoop] = field(default_factory=set)

    @staticmethod
    def of(fn: Function, small_trip: int) -> _Loops:
        cfg = FunctionCFG(fn)
        out = _Loops(cfg)
        for b in fn.blocks:
            inner = [lp for lp in cfg.loops.values() if b in lp.blocks]
            out.chain[b] = sorted(inner, key=lambda lp: len(lp.blocks))
        out.trips = {lp: _trip_count(lp) for lp in cfg.loops.values()}
        out.small = {lp for lp, t in out.trips.items() if t is not None and t <= small_trip}
        return out

    def rank(self, v: Value, loops: list[NaturalLoop]) -> int:
        """How many loops of `loops` (a root's nest, innermost first) `v` varies in."""
        if not isinstance(v, Instr) or v.block is None:
            return 0
        return sum(v.block in lp.blocks for lp in loops)


def _trip_count(lp: NaturalLoop) -> int | None:
    """The trip count of a counted loop `for (i = C0; i < C2; i += C1)` in LLVM's rotated form
    (header phi, latch compare of the next value with a constant), or None."""
    if len(lp.latches) != 1:
        return None
    term = lp.latches[0].terminator
    if term.opcode != "br" or len(term.operands) != 3:
        return None
    cmp = term.operands[0]
    if not isinstance(cmp, Instr) or cmp.opcode != "icmp":
        return None
    a, b = cmp.operands[:2]
    if not isinstance(b, Value) or b.kind != "const" or not isinstance(a, Instr):
        return None
    step_ins = a
    if step_ins.opcode != "add":
        return None
    phi, step = step_ins.operands[:2]
    if not isinstance(phi, Instr) or phi.opcode != "phi" or step.kind != "const":
        return None
    starts = [o for o, blk in zip(phi.operands, phi.incoming, strict=False)
              if blk not in lp.blocks]
    try:
        c0 = int(getattr(starts[0], "value", None)) if len(starts) == 1 else None
        c1, c2 = int(getattr(step, "value", 0)), int(getattr(b, "value", 0))
    except (TypeError, ValueError):
        return None
    if c0 is None or c1 <= 0:
        return None
    return max(0, -(-(c2 - c0) // c1))


class _Rewriter:
    """The rewrites of one function, as edits of its lines."""

    def __init__(self, fn: Function, lines: list[str], lo: int, hi: int, pass_: Licm):
        self.fn, self.lines, self.p = fn, lines, pass_
        self.loops = _Loops.of(fn, pass_.small_trip)
        self.line_of = _line_numbers(fn, lines, lo, hi)
        self.users: dict[int, list[Instr]] = {}  # value -> its users, once per use
        for b in fn.blocks:
            for i in b.instrs:
                for o in i.operands:
                    self.users.setdefault(id(o), []).append(i)
        self.before: dict[int, list[str]] = {}  # line -> new lines before it
        self.replace: dict[int, str] = {}
        self.drop: set[int] = set()  # lines of instructions a rewrite made dead
        self.dropped: list[str] = []  # their names (their debug records go too)
        self.taken: set[int] = set()  # instructions a rewrite already consumed
        self.counts = {"trees": 0, "addresses": 0, "selects": 0}
        self._n = 0

    def name(self, base: str) -> str:
        self._n += 1
        stem = re.sub(r"[^-\w.$]", "_", base.lstrip("%").strip('"'))
        return f"%licm.{stem}.{self._n}"

    def uses(self, v: Value) -> int:
        return len(self.users.get(id(v), ()))

    def nest(self, i: Instr) -> list[NaturalLoop]:
        return self.loops.chain.get(i.block, [])

    def eligible(self, i: Instr) -> list[NaturalLoop] | None:
        """The loop nest of `i` (innermost first) where a rewrite of `i` may pay: a loop that is
        not small, and `i` runs in every iteration of it (its block dominates every latch: a
        value used only in a branch of the body would be hoisted for iterations that skip
        it)."""
        nest = self.nest(i)
        if not nest or nest[0] in self.loops.small or id(i) not in self.line_of:
            return None
        if not all(self.loops.cfg.dominates(i.block, b) for b in nest[0].latches):
            return None
        return nest

    def pays(self, nest: list[NaturalLoop], saved: int, hoisted: int) -> bool:
        """The cost model: `saved` (cost units per iteration of the innermost loop) reaches the
        threshold, and over the loop's iterations (its trip count where it is a constant) it
        is more than the `hoisted` operations that now run once before the loop."""
        if saved < self.p.threshold or saved <= 0:
            return False
        trips = self.loops.trips[nest[0]]
        return trips is None or saved * trips > hoisted

    def preheader(self, lp: NaturalLoop) -> Block | None:
        """The block before `lp`: its header's only predecessor outside it, which branches only
        to the header (LLVM's simplified loop form), or None."""
        outside = [p for p in self.loops.cfg.preds[lp.header] if p not in lp.blocks]
        if len(outside) != 1 or outside[0].succs != [lp.header]:
            return None
        return outside[0] if id(outside[0].terminator) in self.line_of else None

    def place(self, nest: list[NaturalLoop], rank: int, defs: list[Value]) -> int | None:
        """The line before which a value of `rank` (< len(nest)) made of `defs` goes: the end of
        the preheader of the outermost loop it is invariant in, if every def dominates it."""
        lp = nest[len(nest) - rank - 1]
        pre = self.preheader(lp)
        if pre is None:
            return None
        for v in defs:
            if isinstance(v, Instr) and v.block is not None and not (
                    self.loops.cfg.dominates(v.block, pre)):
                return None
        return self.line_of[id(pre.terminator)]

    def remove(self, nodes: list[Instr]) -> None:
        for n in nodes:
            self.drop.add(self.line_of[id(n)])
            self.dropped.append(_result(n))

    def run(self) -> None:
        for b in self.fn.blocks:
            for i in b.instrs:
                if id(i) in self.taken:
                    continue
                if i.opcode in _ASSOC:
                    self.tree(i)
                elif i.opcode == "getelementptr":
                    self.address(i)
                elif i.opcode == "select":
                    self.select(i)

    # -- trees ---------------------------------------------------------------------------------
    def _flatten(self, root: Instr, op: str) -> tuple[list[tuple[Value, str]], list[Instr]]:
        """The leaves (value, text) and the nodes of the `op` tree under `root`; no leaves when
        a node's text is not understood."""
        leaves: list[tuple[Value, str]] = []
        nodes: list[Instr] = []

        def walk(v: Value, text: str, top: bool) -> bool:
            if (isinstance(v, Instr) and v.opcode == op and v.type == root.type
                    and (top or (self.uses(v) == 1 and id(v) not in self.taken
                                 and id(v) in self.line_of))):
                texts = _operands(v)
                if len(texts) != 2 or len(v.operands) < 2:
                    return False
                nodes.append(v)
                return all(walk(o, t, False) for o, t in zip(v.operands[:2], texts, strict=True))
            leaves.append((v, text))
            return True

        if not walk(root, "", True):
            return [], []
        return leaves, nodes

    def _is_interior(self, i: Instr) -> bool:
        """`i` is a single-use operand of the same operation (the tree's root is above it)."""
        users = self.users.get(id(i), [])
        return (len(users) == 1 and users[0].opcode == i.opcode and users[0].type == i.type
                and id(users[0]) in self.line_of)

    def tree(self, root: Instr) -> None:
        op = root.opcode
        nest = self.eligible(root)
        if nest is None or not _INT.match(root.type) or self._is_interior(root):
            return
        leaves, nodes = self._flatten(root, op)
        if len(leaves) < 3:
            return
        d = len(nest)
        ranks = [self.loops.rank(v, nest) for v, _ in leaves]
        if not any(r < d for r in ranks):
            return
        inner = nest[0]
        ops_in_loop = sum(n.block in inner.blocks for n in nodes)
        variant = sum(r == d for r in ranks)
        after = variant if variant < len(leaves) else variant - 1
        # the chain's k-th operation combines the k + 1 lowest-ranked leaves; it is hoisted
        # when the highest of them is below the loop's depth
        n_hoisted = sum(r < d for r in sorted(ranks)[1:])
        if not self.pays(nest, (ops_in_loop - after) * _ASSOC[op], n_hoisted):
            return
        order = sorted(range(len(leaves)), key=lambda k: ranks[k])  # stable
        flag = "nuw " if op == "add" and all(_has(n, "nuw") for n in nodes) else ""
        at = self.line_of[id(root)]
        plan: list[tuple[int, str]] = []  # (line to insert before, text); the root's last
        acc, acc_rank = leaves[order[0]][1], ranks[order[0]]
        defs = [leaves[order[0]][0]]
        for n, k in enumerate(order[1:], 1):
            last = n == len(order) - 1
            dst = _result(root) if last else self.name(_result(root))
            acc_rank = max(acc_rank, ranks[k])
            defs.append(leaves[k][0])
            where = at if acc_rank >= d else self.place(nest, acc_rank, defs)
            if where is None:
                return
            plan.append((where, f"  {dst} = {op} {flag}{root.type} {acc}, {leaves[k][1]}"))
            acc = dst
        for where, line in plan[:-1]:
            self.before.setdefault(where, []).append(line)
        self.replace[at] = plan[-1][1]
        self.remove([n for n in nodes if n is not root])
        self.taken.update(id(n) for n in nodes)
        self.counts["trees"] += 1

    # -- addresses -----------------------------------------------------------------------------
    def address(self, g: Instr) -> None:
        nest = self.eligible(g)
        if nest is None or len(g.operands) != 2:
            return
        at = self.line_of[id(g)]
        m = _GEP.match(self.lines[at])
        if m is None:
            return
        base, idx = g.operands
        d = len(nest)
        if self.loops.rank(base, nest) >= d or not isinstance(idx, Instr):
            return
        ext = None
        s = idx
        if idx.opcode == "zext":
            ext, s = idx, idx.operands[0]
        if (not isinstance(s, Instr) or s.opcode != "add" or id(s) in self.taken
                or self.uses(s) != 1 or self.uses(idx) != 1
                or (ext is not None and id(ext) not in self.line_of)):
            return
        leaves, nodes = self._flatten(s, "add")
        if not leaves or not all(_has(n, "nuw") for n in nodes):
            return
        ranks = [self.loops.rank(v, nest) for v, _ in leaves]
        inv = [t for (_, t), r in zip(leaves, ranks, strict=True) if r < d]
        var = [t for (_, t), r in zip(leaves, ranks, strict=True) if r == d]
        if not inv or not var:
            return
        inner = nest[0]
        before = sum(n.block in inner.blocks for n in nodes) + (
            ext is not None and ext.block in inner.blocks)
        after = (len(var) - 1) + (ext is not None)
        if not self.pays(nest, before - after, len(inv) + (ext is not None)):
            return
        ty = s.type
        inv_rank = max([self.loops.rank(base, nest)]
                       + [r for r in ranks if r < d])
        where = self.place(nest, inv_rank, [base] + [v for (v, _), r in zip(leaves, ranks,
                                                                              strict=True)
                                                      if r < d])
        if where is None:
            return
        hoisted: list[str] = []
        in_loop: list[str] = []

        def total(vals: list[str], out: list[str]) -> str:
            acc = vals[0]
            for v in vals[1:]:
                dst = self.name(_result(g))
                out.append(f"  {dst} = add nuw {ty} {acc}, {v}")
                acc = dst
            if ext is not None:
                dst = self.name(_result(g))
                out.append(f"  {dst} = zext {ty} {acc} to i64")
                acc = dst
            return acc

        head, flags, elem, base_text, _, tail = m.groups()
        i_part = total(inv, hoisted)
        inner_ptr = self.name(_result(g))
        hoisted.append(f"  {inner_ptr} = getelementptr {flags}{elem}, ptr {base_text}, "
                       f"i64 {i_part}")
        v_part = total(var, in_loop)
        self.before.setdefault(where, []).extend(hoisted)
        self.before.setdefault(at, []).extend(in_loop)
        self.replace[at] = f"{head}{flags}{elem}, ptr {inner_ptr}, i64 {v_part}{tail}"
        self.remove(nodes + ([ext] if ext is not None else []))
        self.taken.update(id(n) for n in nodes)
        self.taken.add(id(g))
        self.counts["addresses"] += 1

    # -- conditions ----------------------------------------------------------------------------
    def select(self, r: Instr) -> None:
        nest = self.eligible(r)
        texts = _operands(r)
        if nest is None or len(r.operands) != 3 or not texts:
            return
        c1 = r.operands[0]
        d = len(nest)
        for inner_at, other_at in ((2, 1), (1, 2)):
            t = r.operands[inner_at]
            if (not isinstance(t, Instr) or t.opcode != "select" or id(t) in self.taken
                    or self.uses(t) != 1 or t.block is not r.block):
                continue
            inner = _operands(t)
            if not inner or t.type != r.type:
                continue
            # the arm of t equal to r's other arm: t's true arm (r = c1 ? x : (c2 ? x : y)) or
            # its false arm (r = c1 ? (c2 ? x : y) : y)
            same = inner[1] if inner_at == 2 else inner[2]
            if same != texts[other_at]:
                continue
            c2 = t.operands[0]
            if self.loops.rank(c1, nest) >= d or self.loops.rank(c2, nest) >= d:
                continue
            if not self.pays(nest, 1, 1):
                return
            cond = self.name(_result(r))
            at = self.line_of[id(r)]
            rank = max(self.loops.rank(c1, nest), self.loops.rank(c2, nest))
            where = self.place(nest, rank, [c1, c2])
            if where is None:
                return
            if inner_at == 2:  # c1 ? x : (c2 ? x : y)  ==  (c1 || c2) ? x : y
                merged = f"  {cond} = select i1 {texts[0]}, i1 true, i1 {inner[0]}"
                arms = (texts[1], inner[2])
            else:  # c1 ? (c2 ? x : y) : y  ==  (c1 && c2) ? x : y
                merged = f"  {cond} = select i1 {texts[0]}, i1 {inner[0]}, i1 false"
                arms = (inner[1], texts[2])
            self.before.setdefault(where, []).append(merged)
            self.replace[at] = (f"  {_result(r)} = select i1 {cond}, {r.type} {arms[0]}, "
                                f"{r.type} {arms[1]}")
            self.remove([t])
            self.taken.update((id(t), id(r)))
            self.counts["selects"] += 1
            return

    def has_loops(self) -> bool:
        return bool(self.loops.cfg.loops)

    def edited(self) -> bool:
        return bool(self.replace)

    def apply(self, out: list[str], lo: int, hi: int) -> None:
        gone = re.compile("|".join(re.escape(n) + r"\b" for n in self.dropped)) \
            if self.dropped else None
        for k in range(lo, hi + 1):
            out.extend(self.before.get(k, ()))
            if k in self.drop:
                continue
            line = self.replace.get(k, self.lines[k])
            if gone is not None and line.lstrip().startswith("#dbg_") and gone.search(line):
                continue  # a debug record of a value that is gone
            out.append(line)


_BIN = re.compile(r"=\s*(add|mul|and|or|xor)\s+((?:nuw |nsw |disjoint )*)(i\d+)\s+(.*)$")
_SEL = re.compile(r"=\s*select\s+(?:(?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc) )*i1 (.*)$")


def _operands(i: Instr) -> list[str]:
    """The operands of a binary operation or a select as written in its text (without the
    select's arm types), metadata attachments left out; [] when the text is not understood."""
    m = _BIN.search(i.text) or _SEL.search(i.text)
    if m is None:
        return []
    parts = [p for p in split_top(m.group(m.lastindex)) if not p.startswith("!")]
    if i.opcode == "select":
        if len(parts) != 3:
            return []
        arms = [p.split(None, 1) for p in parts[1:]]
        if any(len(a) != 2 or a[0] != i.type for a in arms):
            return []
        return [parts[0]] + [a[1] for a in arms]
    return parts if len(parts) == 2 else []


def _has(i: Instr, flag: str) -> bool:
    head = i.text.split("=", 1)[-1].split(i.type, 1)[0]
    return re.search(rf"\b{flag}\b", head) is not None


def _result(i: Instr) -> str:
    return i.text.split("=", 1)[0].strip()


_LABEL = re.compile(r"^([-\w.$]+|\"[^\"]+\"):")
_TARGET = re.compile(r"label %([-\w.$]+|\"[^\"]+\")")


def _with_back_edges(lines: list[str]) -> set[str]:
    """The functions with a branch to a label written above it: every loop has one (its latch
    branches back to its header, which LLVM prints first in a reducible loop); a function
    without one has no loop to look at, and is left out of the view (a paper-shape module's
    view takes seconds)."""
    out = set()
    for name, (lo, hi) in functions_of(lines).items():
        seen = {"entry"}
        for ln in lines[lo + 1:hi]:
            if m := _LABEL.match(ln):
                seen.add(m.group(1))
            elif " br " in ln or ln.lstrip().startswith(("br ", "switch ")) or "label %" in ln:
                if any(t in seen for t in _TARGET.findall(ln)):
                    out.add(name)
                    break
    return out


def _line_numbers(fn: Function, lines: list[str], lo: int, hi: int) -> dict[int, int]:
    """Instruction -> its line, for the instructions written on one line (a multi-line switch
    is skipped; so are instructions whose text does not start their line)."""
    instrs = [i for b in fn.blocks for i in b.instrs]
    out: dict[int, int] = {}
    k = 0
    in_switch = False
    for n in range(lo + 1, hi):
        raw = lines[n]
        s = raw.strip()
        if in_switch:
            in_switch = not s.startswith("]")
            continue
        if not s or s.startswith(";") or s.startswith("#dbg_") or not raw.startswith("  "):
            continue
        if k >= len(instrs):
            break
        ins = instrs[k]
        k += 1
        if ins.opcode == "switch" and s.endswith("["):
            in_switch = True
            continue
        if ins.text and s.startswith(ins.text.strip()[:24]):
            out[id(ins)] = n
    return out


@dataclass(frozen=True, slots=True)
class Licm(ModulePass):
    """Loop-invariant code motion after normalisation (reassociation by loop depth, address
    splitting, merged conditions), with a cost threshold; LLVM's LICM does the hoisting."""

    name: ClassVar[str] = "licm"
    threshold: int = 1
    small_trip: int = 8

    def run(self, module: PassInput, ctx: PassContext) -> HostRewrite | str:
        text = module.text
        require_device(text, self.name, ctx.source)
        if self.threshold < 0 or self.small_trip < 0:
            raise PassError(f"{self.name}: threshold and small_trip must be at least 0")
        looping = _with_back_edges(text.splitlines())
        if not looping:
            return text
        view = build_view(module.peek(), only=looping)
        lines = view.text.splitlines()
        funcs = {n: r for n, r in functions_of(lines).items() if n in looping}
        out: list[str] = []
        last = 0
        notes = []
        for name, (lo, hi) in sorted(funcs.items(), key=lambda kv: kv[1][0]):
            fn = view.functions.get(name)
            if fn is None or not fn.blocks:
                continue
            rw = _Rewriter(fn, lines, lo, hi, self)
            if not rw.has_loops():
                continue
            rw.run()
            if not rw.edited():
                continue
            out.extend(lines[last:lo])
            rw.apply(out, lo, hi)
            last = hi + 1
            c = rw.counts
            notes.append(f"{name}: {c['trees']} expression(s) regrouped, "
                         f"{c['addresses']} address(es) split, {c['selects']} condition(s) "
                         "merged")
        if not notes:
            return text
        out.extend(lines[last:])
        return HostRewrite("\n".join(out) + "\n", ctx.host_program, tuple(notes))
