"""The dependence-counter helpers of a `counters` megakernel (`sirius_mk_wait`,
`sirius_mk_signal`: fusion/codegen/grid.py) run as written, one instruction at a time.

The executor runs a megakernel's blocks as fibers (counters.py); where a block reaches a wait
or a signal it runs the helper's own IR, as the module holds it after LLVM's passes, for the
block's first thread (the one that talks to the other blocks; `check_idle` makes sure the
others do no memory work there), on the megakernel's flag and table memory (`Memory`). A
helper that spins (a loop that comes back to the same state, every register equal, with no
store in between: nothing but another block can change what it reads) yields: `Fiber.resume`
returns False with the words it read in the spin (`Fiber.blocked`), and resumes there when
the scheduler has run other blocks. So what decides when a block may go on is the device's own
code on the device's own tables, not a reading of them: a wrong index, target or flag in the
helper, or a table entry naming the wrong producer, changes what the executor runs, and verify
sees it.

The subset: integer arithmetic, comparisons, casts, select, phi, branches and switches,
`getelementptr` over integers and arrays of them, integer loads and stores (volatile or
atomic; fences are no-ops in a run that is sequentially consistent), the thread-id special
registers, the block barrier (a no-op for the one thread run) and integer min/max intrinsics.
Anything else is refused (`Unsupported`) with the instruction, and the megakernel with it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.analysis.irvalues import Argument, Const, Function, Instr, Value

# a helper's operand: ("r", register) | ("a", argument) | ("c", integer) | ("g", global name)
Ref = tuple[str, object]
# a pointer at run time: (global name, byte offset)
Pointer = tuple[str, int]

MAX_STEPS = 5_000_000  # instructions one resume may run before it is called a runaway
_BIN = ("add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "udiv", "sdiv", "urem",
        "srem")
_CASTS = ("sext", "zext", "trunc")
_MINMAX = {"smin": min, "smax": max, "umin": min, "umax": max}
_INT = re.compile(r"i(\d+)$")


class Unsupported(Exception):
    """An instruction outside the subset a helper may use."""


class Fault(Exception):
    """A helper that goes wrong at run time (an access outside its globals, a runaway)."""


@dataclass(frozen=True, slots=True)
class Step:
    op: str          # an opcode of the subset ("phi", "br", "load", ...)
    dest: int        # its register, -1 for none
    bits: int        # the width of its integer result, or of what it loads or stores
    args: tuple[Ref, ...]
    extra: object = None  # per op: predicate, targets, GEP scales, cast source width, ...


@dataclass(frozen=True, slots=True)
class Code:
    """A helper compiled to steps: its blocks (phis first), the blocks loops return to (where
    a spin is looked for) and the block names (for messages)."""
    name: str
    nregs: int
    blocks: tuple[tuple[Step, ...], ...]
    headers: frozenset[int]
    labels: tuple[str, ...]
    live: tuple[tuple[int, ...], ...]  # per block: the registers live at its entry (phis too)


def _bits(ty: str) -> int:
    m = _INT.match(ty.strip())
    if not m:
        raise Unsupported(f"a value of type {ty}")
    return int(m.group(1))


def _size(ty: str) -> int:
    """Bytes of an integer or an array of them (what a GEP steps over)."""
    ty = ty.strip()
    m = re.fullmatch(r"\[(\d+) x (.+)\]", ty)
    if m:
        return int(m.group(1)) * _size(m.group(2))
    return max(1, _bits(ty) // 8)


def _element(ty: str) -> str:
    m = re.fullmatch(r"\[\d+ x (.+)\]", ty.strip())
    if not m:
        raise Unsupported(f"an index into {ty}")
    return m.group(1)


def compile_helper(fn: Function) -> Code:
    """`fn`'s blocks as steps; `Unsupported` names the first instruction outside the subset."""
    regs: dict[int, int] = {}
    index = {id(b): k for k, b in enumerate(fn.blocks)}
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.type not in ("void", ""):
                regs[id(ins)] = len(regs)

    def ref(v: Value) -> Ref:
        if isinstance(v, Instr):
            return ("r", regs[id(v)])
        if isinstance(v, Argument):
            return ("a", v.index)
        if isinstance(v, Const) and isinstance(v.value, int):
            return ("c", v.value)
        if v.kind == "undef":
            return ("c", 0)
        if v.kind == "global":
            return ("g", v.name)
        raise Unsupported(f"the operand {v.kind} {v.name or v.type}")

    blocks = []
    for b in fn.blocks:
        steps = []
        for ins in b.instrs:
            try:
                steps.append(_step(ins, regs.get(id(ins), -1), ref, index))
            except Unsupported as e:
                raise Unsupported(f"{e} in `{ins.text.strip()[:100]}`") from None
        blocks.append(tuple(steps))
    # a loop header: a block some branch reaches from itself or from a later block
    headers = frozenset(index[id(s)] for k, b in enumerate(fn.blocks)
                        for s in b.succs if index[id(s)] <= k)
    succs = [[index[id(s)] for s in b.succs] for b in fn.blocks]
    return Code(fn.name, len(regs), tuple(blocks), headers,
                tuple(b.name or str(k) for k, b in enumerate(fn.blocks)),
                _live(blocks, succs))


def _live(blocks: list[tuple[Step, ...]], succs: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    """The registers live at each block's entry, its phis' included: all a spin's state is
    (registers a loop only wrote before are not, so the first round of a spin is seen)."""
    def regs(refs) -> set[int]:
        return {x for kind, x in refs if kind == "r"}

    n = len(blocks)
    phis = [{s.dest for s in b if s.op == "phi"} for b in blocks]
    defs = [{s.dest for s in b if s.dest >= 0} for b in blocks]
    uses = [set().union(*(regs(s.args) for s in b if s.op != "phi")) - defs[k]
            for k, b in enumerate(blocks)]
    # what a phi of block t takes from block k
    phi_in = [[regs(r for s in blocks[t] if s.op == "phi"
                    for r, p in zip(s.args, s.extra, strict=True) if p == k)
               for t in succs[k]] for k in range(n)]
    live_in: list[set[int]] = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for k in reversed(range(n)):
            out = set()
            for t, took in zip(succs[k], phi_in[k], strict=True):
                out |= (live_in[t] - phis[t]) | took
            new = uses[k] | (out - defs[k])
            if new != live_in[k]:
                live_in[k], changed = new, True
    return tuple(tuple(sorted(live_in[k] | phis[k])) for k in range(n))


def _step(ins: Instr, dest: int, ref, index: dict[int, int]) -> Step:
    op, ops = ins.opcode, ins.operands
    if op in _BIN:
        return Step(op, dest, _bits(ins.type), (ref(ops[0]), ref(ops[1])))
    if op == "icmp":
        return Step(op, dest, _bits(ops[0].type) if not ops[0].type.startswith("ptr") else 64,
                    (ref(ops[0]), ref(ops[1])), ins.predicate)
    if op == "select":
        return Step(op, dest, 0, tuple(ref(o) for o in ops))
    if op in _CASTS:
        return Step(op, dest, _bits(ins.type), (ref(ops[0]),), _bits(ops[0].type))
    if op == "phi":
        return Step(op, dest, 0, tuple(ref(o) for o in ops),
                    tuple(index[id(b)] for b in ins.incoming))
    if op == "br":
        targets = tuple(index[id(b)] for b in ins.successors())
        return Step(op, -1, 0, (ref(ops[0]),) if len(targets) == 2 else (), targets)
    if op == "switch":
        cases = tuple((v, index[id(b)]) for v, b in ins.switch_cases())
        return Step(op, -1, _bits(ops[0].type), (ref(ops[0]),),
                    (index[id(ops[1])], cases))
    if op == "ret":
        return Step(op, -1, 0, ())
    if op == "getelementptr":
        ty, scales = ins.source_type, []  # per index: (bytes it steps, its width)
        for k, o in enumerate(ops[1:]):
            scales.append((_size(ty), _bits(o.type)))
            if k + 2 < len(ops):
                ty = _element(ty)
        return Step(op, dest, 0, tuple(ref(o) for o in ops), tuple(scales))
    if op == "load":
        return Step(op, dest, _bits(ins.type), (ref(ops[0]),), " atomic " in ins.text)
    if op == "store":
        return Step(op, -1, _bits(ops[0].type), (ref(ops[0]), ref(ops[1])))
    if op == "fence":
        return Step("nop", -1, 0, ())
    if op == "call" and ins.callee is not None:
        name = ins.callee.name
        m = re.fullmatch(r"llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid|ntid|nctaid)\.([xyz])", name)
        if m:
            return Step("sreg", dest, 32, (), (m.group(1), "xyz".index(m.group(2))))
        if name.startswith("llvm.nvvm.barrier"):
            return Step("nop", -1, 0, ())
        m = re.fullmatch(r"llvm\.([su]m(?:in|ax))\.i\d+", name)
        if m:
            return Step("minmax", dest, _bits(ins.type), tuple(ref(o) for o in ins.args),
                        m.group(1))
        raise Unsupported(f"a call of {name}")
    raise Unsupported(f"the instruction {op}")


def _signed(v: int, bits: int) -> int:
    """`v` (0 <= v < 2^bits) as a signed integer; i1 too (`sext i1 true` is -1, which the
    helpers rely on: intops.signed and ptxfloat._signed leave an i1 unsigned)."""
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


class Memory:
    """The globals a helper reaches: name -> (bytes, writable). Every access is checked."""

    def __init__(self, arrays: dict[str, tuple[bytearray, bool]]):
        self.arrays = arrays

    def _at(self, p: Pointer, n: int, write: bool) -> bytearray:
        if not isinstance(p, tuple):
            raise Fault(f"an access through a pointer that is not one of the megakernel's "
                        f"globals ({p})")
        name, off = p
        got = self.arrays.get(name)
        if got is None:
            raise Fault(f"an access to @{name}, which is not one of the megakernel's tables")
        data, writable = got
        if off < 0 or off + n > len(data):
            raise Fault(f"an access at byte {off} of @{name}, which has {len(data)} bytes")
        if write and not writable:
            raise Fault(f"a store to the constant @{name}")
        return data

    def load(self, p: Pointer, bits: int) -> int:
        n = bits // 8
        data = self._at(p, n, False)
        return int.from_bytes(data[p[1]:p[1] + n], "little")

    def store(self, p: Pointer, bits: int, value: int) -> None:
        n = bits // 8
        data = self._at(p, n, True)
        data[p[1]:p[1] + n] = (value % (1 << bits)).to_bytes(n, "little")


@dataclass(frozen=True, slots=True)
class Env:
    """The special registers of the thread that runs the helper."""
    tid: tuple[int, int, int]
    ctaid: tuple[int, int, int]
    ntid: tuple[int, int, int]
    nctaid: tuple[int, int, int]


class Fiber:
    """One call of a helper, run until it returns or spins."""

    def __init__(self, code: Code, args: tuple, env: Env, memory: Memory):
        self.code, self.args, self.env, self.memory = code, args, env, memory
        self.regs: list = [0] * code.nregs
        self.block, self.prev, self.pos = 0, -1, 0
        self.blocked: set[Pointer] = set()  # what the spin it stopped in reads
        self.stored: list[Pointer] = []  # where it stored, since the last resume
        self.memory_ops = 0   # loads and stores it made, over its whole run
        self.flag_checks = 0  # atomic loads outside spins that went round again

    def _value(self, r: Ref):
        kind, x = r
        if kind == "r":
            return self.regs[x]
        if kind == "a":
            return self.args[x]
        if kind == "g":
            return (x, 0)
        return x

    def resume(self) -> bool:
        """Run on; True when the helper returned, False when it spins (`blocked`)."""
        code, regs, val = self.code, self.regs, self._value
        self.stored, self.blocked = [], set()
        seen: dict[tuple, tuple[int, int]] = {}  # loop-header state -> (stores, loads at)
        loaded: list[tuple[Pointer, bool]] = []
        stores, steps = 0, 0
        block, prev, pos = self.block, self.prev, self.pos
        while True:
            steps_here = code.blocks[block]
            if pos == 0:  # entering the block: its phis at once, then look for a spin
                while pos < len(steps_here) and steps_here[pos].op == "phi":
                    pos += 1
                vals = []
                for s in steps_here[:pos]:
                    if prev not in s.extra:
                        raise Fault(f"{code.name}: a phi in {code.labels[block]} without a "
                                    f"value from {code.labels[prev]}")
                    vals.append(val(s.args[s.extra.index(prev)]))
                for s, v in zip(steps_here[:pos], vals, strict=True):
                    regs[s.dest] = v
                if block in code.headers:
                    key = (block, tuple([regs[r] for r in code.live[block]]))
                    was = seen.get(key)
                    if was is not None and was[0] == stores:
                        spin = loaded[was[1]:]
                        self.blocked = {p for p, _ in spin}
                        self.flag_checks -= sum(1 for _, atomic in spin if atomic)
                        self.block, self.prev, self.pos = block, prev, pos
                        return False
                    seen[key] = (stores, len(loaded))
            while True:
                s = steps_here[pos]
                pos += 1
                steps += 1
                op = s.op
                if op == "br":
                    t = s.extra
                    nxt = t[0] if len(t) == 1 or val(s.args[0]) else t[1]
                    break
                if op == "switch":
                    v = val(s.args[0]) % (1 << s.bits)
                    default, cases = s.extra
                    nxt = next((b for c, b in cases if c % (1 << s.bits) == v), default)
                    break
                if op == "ret":
                    return True
                if op in _BIN:
                    regs[s.dest] = _binary(op, val(s.args[0]), val(s.args[1]), s.bits)
                elif op == "icmp":
                    regs[s.dest] = int(_compare(s.extra, val(s.args[0]), val(s.args[1]),
                                                s.bits))
                elif op == "select":
                    regs[s.dest] = val(s.args[1]) if val(s.args[0]) else val(s.args[2])
                elif op in _CASTS:
                    x = val(s.args[0])
                    if op == "sext":
                        x = _signed(x, s.extra)
                    regs[s.dest] = x % (1 << s.bits)
                elif op == "getelementptr":
                    base = val(s.args[0])
                    if not isinstance(base, tuple):
                        raise Fault(f"{code.name}: a GEP on a value that is not a pointer to "
                                    "one of the megakernel's globals")
                    off = base[1] + sum(
                        _signed(val(r) % (1 << w), w) * k
                        for r, (k, w) in zip(s.args[1:], s.extra, strict=True))
                    regs[s.dest] = (base[0], off)
                elif op == "load":
                    p = val(s.args[0])
                    regs[s.dest] = self.memory.load(p, s.bits)
                    loaded.append((p, s.extra))
                    self.memory_ops += 1
                    self.flag_checks += bool(s.extra)
                elif op == "store":
                    p = val(s.args[1])
                    self.memory.store(p, s.bits, val(s.args[0]))
                    self.stored.append(p)
                    stores += 1
                    self.memory_ops += 1
                elif op == "sreg":
                    what, axis = s.extra
                    regs[s.dest] = getattr(self.env, what)[axis]
                elif op == "minmax":
                    a, b = val(s.args[0]), val(s.args[1])
                    if s.extra[0] == "s":
                        a, b = _signed(a, s.bits), _signed(b, s.bits)
                    regs[s.dest] = _MINMAX[s.extra](a, b) % (1 << s.bits)
                # "nop": fences and the block barrier
                if steps > MAX_STEPS:
                    raise Fault(f"{code.name} ran {MAX_STEPS:,} instructions without returning "
                                "or coming back to a state it was in")
            prev, block, pos = block, nxt, 0


def _binary(op: str, a: int, b: int, bits: int) -> int:
    m = 1 << bits
    if op == "add":
        r = a + b
    elif op == "sub":
        r = a - b
    elif op == "mul":
        r = a * b
    elif op == "and":
        r = a & b
    elif op == "or":
        r = a | b
    elif op == "xor":
        r = a ^ b
    elif op == "shl":
        r = a << (b % m) if b % m < bits else 0
    elif op == "lshr":
        r = (a % m) >> (b % m) if b % m < bits else 0
    elif op == "ashr":
        r = _signed(a % m, bits) >> min(b % m, bits - 1)
    elif b % m == 0:
        raise Fault(f"a division by zero ({op})")
    elif op == "udiv":
        r = (a % m) // (b % m)
    elif op == "urem":
        r = (a % m) % (b % m)
    else:  # sdiv, srem: rounded toward zero
        x, y = _signed(a % m, bits), _signed(b % m, bits)
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        r = q if op == "sdiv" else x - q * y
    return r % m


def _compare(pred: str, a, b, bits: int) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):  # pointers: same global only
        if pred not in ("eq", "ne"):
            raise Fault(f"an ordered comparison of pointers ({pred})")
        return (a == b) == (pred == "eq")
    m = 1 << bits
    a, b = a % m, b % m
    if pred[0] == "s":
        a, b = _signed(a, bits), _signed(b, bits)
    return {"eq": a == b, "ne": a != b, "ugt": a > b, "uge": a >= b, "ult": a < b,
            "ule": a <= b, "sgt": a > b, "sge": a >= b, "slt": a < b, "sle": a <= b}[pred]


def check_idle(code: Code, args: tuple, env: Env, memory: Memory) -> None:
    """Only the first thread of a block is run through the helper: refuse one in which any
    other thread (here: the last of the block) loads, stores or spins."""
    f = Fiber(code, args, env, memory)
    if not f.resume() or f.memory_ops:
        raise Fault(f"{code.name} does memory work in threads other than the block's first "
                    f"(thread {env.tid}); the executor runs it for the first thread only")

