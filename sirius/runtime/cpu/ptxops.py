"""The table of PTX instructions that `ptxlift.py` lifts to LLVM IR, one entry per instruction
and type (`add.f16`, `cvt.f16.f32`, `setp.f16`, ...), with the modifiers each accepts.

An entry's handler gets the instruction (`Instr`: modifiers, types, operand reader and writer)
and emits IR through `ptxfloat.Builder`. Semantics follow the PTX ISA (9.1): half and bfloat
arithmetic rounds to nearest even, `.ftz` flushes subnormal inputs and results to zero of the
same sign, `.sat` clamps to [0, 1] (NaN to +0), `.relu` clamps negatives to 0 (NaN stays NaN);
`min`/`max` return the number when one input is NaN and order -0 < +0; `.approx` functions are
computed by the C library (within the error PTX allows), `.ftz` flushing their subnormals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sirius.runtime.cpu import ptxfloat as P
from sirius.runtime.cpu.ptxfloat import Builder, Fmt, ity

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
INT_TYPES = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
BIT_TYPES = ("b16", "b32", "b64")
ROUND = {"rn", "rz", "rm", "rp"}
IROUND = {"rni", "rzi", "rmi", "rpi"}


class Unsupported(Exception):
    """Why one instruction of a template cannot be lifted."""


@dataclass(frozen=True, slots=True)
class Entry:
    key: str          # "add.f16": opcode and type(s)
    mods: frozenset   # modifiers it accepts
    handler: Callable


def width(ty: str) -> int:
    if ty == "pred":
        return 1
    if ty.endswith("x2"):
        return 32
    return int(ty.lstrip("fbsu") or 0)


class Instr:
    """One parsed instruction, bound to the registers of the template being lifted."""

    def __init__(self, opcode: str, mods: list[str], types: list[str], operands: list[str],
                 read: Callable[[str, int], str], write: Callable[[str, str, int], None],
                 regw: Callable[[str], int]):
        self.opcode, self.mods, self.types, self.operands = opcode, set(mods), types, operands
        self._read, self._write, self._regw = read, write, regw

    def reg_width(self, i: int) -> int:
        """The width of the register operand `i` names (a cvt to .s8 may write a wider one)."""
        return self._regw(self.operands[i])

    def src(self, i: int, bits: int) -> str:
        return self._read(self.operands[i], bits)

    def dst(self, value: str, bits: int, i: int = 0) -> None:
        self._write(self.operands[i], value, bits)

    def rnd(self, default: str | None = "rn") -> str:
        r = self.mods & ROUND
        return next(iter(r)) if r else default


# ---- lanes ---------------------------------------------------------------------------------------
def _lanes(b: Builder, v: str) -> tuple[str, str]:
    return b(f"trunc i32 {v} to i16"), b(f"trunc i32 {b(f'lshr i32 {v}, 16')} to i16")


def _pack(b: Builder, lo: str, hi: str) -> str:
    h = b(f"shl i32 {b(f'zext i16 {hi} to i32')}, 16")
    return b(f"or i32 {h}, {b(f'zext i16 {lo} to i32')}")


def _per_lane(b: Builder, ty: str, fn: Callable[..., str], srcs: list[str]) -> str:
    """Apply a scalar function to a scalar or to each half of an x2 value."""
    if not ty.endswith("x2"):
        return fn(*srcs)
    lanes = [_lanes(b, s) for s in srcs]
    return _pack(b, fn(*[x[0] for x in lanes]), fn(*[x[1] for x in lanes]))


def _fmt(ty: str) -> Fmt:
    return P.FMTS[ty.removesuffix("x2")]


# ---- arithmetic ----------------------------------------------------------------------------------
def _clamp(b: Builder, x: str, ins: Instr) -> str:
    if "sat" in ins.mods:  # [0, 1]; NaN and -0 to +0
        lo = b(f"select i1 {b(f'fcmp ogt double {x}, 0.0')}, double {x}, double 0.0")
        return b(f"select i1 {b(f'fcmp ogt double {lo}, 1.0')}, double 1.0, double {lo}")
    if "relu" in ins.mods:  # negatives to +0, NaN stays
        return b(f"select i1 {b(f'fcmp olt double {x}, 0.0')}, double 0.0, double {x}")
    return x


def _arith(b: Builder, ins: Instr) -> None:
    ty = ins.types[0]
    fmt, n = _fmt(ty), {"add": 2, "sub": 2, "mul": 2, "fma": 3}[ins.opcode]
    ftz = "ftz" in ins.mods
    if fmt is P.F32 and not ty.endswith("x2"):
        return _arith_f32(b, ins, n)

    def one(*vs: str) -> str:
        xs = [P.decode(b, P.flush(b, v, fmt) if ftz else v, fmt) for v in vs]
        if ins.opcode == "mul":
            x = b(f"fmul double {xs[0]}, {xs[1]}")  # exact: 22 significant bits at most
        elif ins.opcode == "fma":
            x = P.add_odd(b, b(f"fmul double {xs[0]}, {xs[1]}"), xs[2])
        else:
            y = b(f"fneg double {xs[1]}") if ins.opcode == "sub" else xs[1]
            x = P.add_odd(b, xs[0], y)
        r = P.round_double(b, _clamp(b, x, ins), fmt, "rn")
        return P.flush(b, r, fmt) if ftz else r

    ins.dst(_per_lane(b, ty, one, [ins.src(i + 1, width(ty)) for i in range(n)]), width(ty))


def _arith_f32(b: Builder, ins: Instr, n: int) -> None:
    ftz = "ftz" in ins.mods
    vs = [ins.src(i + 1, 32) for i in range(n)]
    xs = [P.decode_f32(b, P.flush(b, v, P.F32) if ftz else v, P.F32) for v in vs]
    if ins.opcode == "fma":
        r = b.call("float", "llvm.fma.f32", *[f"float {x}" for x in xs])
    else:
        r = b(f"f{ins.opcode} float {xs[0]}, {xs[1]}")
    if "sat" in ins.mods:
        r = b(f"select i1 {b(f'fcmp ogt float {r}, 0.0')}, float {r}, float 0.0")
        r = b(f"select i1 {b(f'fcmp ogt float {r}, 1.0')}, float 1.0, float {r}")
    bits = b(f"bitcast float {r} to i32")
    ins.dst(P.flush(b, bits, P.F32) if ftz else bits, 32)


def _sign(b: Builder, ins: Instr) -> None:
    ty = ins.types[0]
    fmt, w = _fmt(ty), width(ty)
    sign = 1 << (fmt.bits - 1)
    t = ity(fmt.bits)

    def one(v: str) -> str:
        v = P.flush(b, v, fmt) if "ftz" in ins.mods else v
        if ins.opcode == "neg":
            return b(f"xor {t} {v}, {P._signed(sign, fmt.bits)}")
        return b(f"and {t} {v}, {sign - 1}")

    ins.dst(_per_lane(b, ty, one, [ins.src(1, w)]), w)


def _minmax(b: Builder, ins: Instr) -> None:
    ty = ins.types[0]
    fmt, w = _fmt(ty), width(ty)
    t = ity(fmt.bits)

    def one(x: str, y: str) -> str:
        if "ftz" in ins.mods:
            x, y = P.flush(b, x, fmt), P.flush(b, y, fmt)
        fx, fy = P.decode(b, x, fmt), P.decode(b, y, fmt)
        cmp = "olt" if ins.opcode == "min" else "ogt"
        pick = b(f"select i1 {b(f'fcmp {cmp} double {fx}, {fy}')}, {t} {x}, {t} {y}")
        # equal values: the same bits, or zeros of both signs (-0 < +0)
        both = b(f"{'or' if ins.opcode == 'min' else 'and'} {t} {x}, {y}")
        r = b(f"select i1 {b(f'fcmp oeq double {fx}, {fy}')}, {t} {both}, {t} {pick}")
        nx, ny = P.is_nan(b, x, fmt), P.is_nan(b, y, fmt)
        r = b(f"select i1 {ny}, {t} {x}, {t} {r}")
        r = b(f"select i1 {nx}, {t} {y}, {t} {r}")
        nan = b(f"{'or' if 'NaN' in ins.mods else 'and'} i1 {nx}, {ny}")
        return b(f"select i1 {nan}, {t} {fmt.nan}, {t} {r}")

    ins.dst(_per_lane(b, ty, one, [ins.src(1, w), ins.src(2, w)]), w)


_LIBM = {"ex2": "__nv_exp2f", "lg2": "__nv_log2f", "tanh": "__nv_tanhf", "sin": "__nv_sinf",
         "cos": "__nv_cosf"}


def _func(b: Builder, ins: Instr) -> None:
    """rcp, sqrt, rsqrt, ex2, lg2, tanh, sin, cos, div on f32 (and ex2/tanh on f16, bf16)."""
    ty = ins.types[0]
    fmt, w = _fmt(ty), width(ty)
    ftz = "ftz" in ins.mods or ("approx" in ins.mods and ins.opcode in ("sin", "cos"))

    def one(*vs: str) -> str:
        xs = [P.decode_f32(b, P.flush(b, v, fmt) if ftz else v, fmt) for v in vs]
        x = xs[0]
        if ins.opcode == "rcp":
            r = b(f"fdiv float 1.0, {x}")
        elif ins.opcode == "div":
            r = b(f"fdiv float {x}, {xs[1]}")
        elif ins.opcode in ("sqrt", "rsqrt"):
            r = b.call("float", "llvm.sqrt.f32", f"float {x}")
            r = b(f"fdiv float 1.0, {r}") if ins.opcode == "rsqrt" else r
        else:
            r = b.call("float", _LIBM[ins.opcode], f"float {x}")
        if fmt is P.F32:
            bits = b(f"bitcast float {r} to i32")
        else:
            bits = P.round_f32(b, r, fmt, "rn")
        return P.flush(b, bits, fmt) if ftz else bits

    n = 2 if ins.opcode == "div" else 1
    ins.dst(_per_lane(b, ty, one, [ins.src(i + 1, w) for i in range(n)]), w)


# ---- comparisons, selection, moves, bits ---------------------------------------------------------
_FCMP = {"eq": "oeq", "ne": "one", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge",
         "equ": "ueq", "neu": "une", "ltu": "ult", "leu": "ule", "gtu": "ugt", "geu": "uge",
         "num": "ord", "nan": "uno"}
_ICMP = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge",
         "lo": "ult", "ls": "ule", "hi": "ugt", "hs": "uge"}


def _compare(b: Builder, ins: Instr, ty: str, x: str, y: str) -> str:
    ops = ins.mods & (set(_FCMP) | set(_ICMP))
    if len(ops) != 1:
        raise Unsupported("needs one comparison operator")
    op = next(iter(ops))
    if ty in INT_TYPES or ty in BIT_TYPES:
        cmp = _ICMP[op]
        if ty[0] == "u" and cmp[0] == "s":
            cmp = "u" + cmp[1:]
        return b(f"icmp {cmp} {ity(width(ty))} {x}, {y}")
    fmt = _fmt(ty)
    if "ftz" in ins.mods:
        x, y = P.flush(b, x, fmt), P.flush(b, y, fmt)
    return b(f"fcmp {_FCMP[op]} double {P.decode(b, x, fmt)}, {P.decode(b, y, fmt)}")


def _boolop(b: Builder, ins: Instr, p: str) -> str:
    ops = ins.mods & {"and", "or", "xor"}
    if not ops:
        return p
    return b(f"{next(iter(ops))} i1 {p}, {ins.src(3, 1)}")


def _setp(b: Builder, ins: Instr) -> None:
    ty = ins.types[0]
    w = width(ty)
    x, y = ins.src(1, w), ins.src(2, w)
    if ty.endswith("x2"):
        (xl, xh), (yl, yh) = _lanes(b, x), _lanes(b, y)
        lo = _boolop(b, ins, _compare(b, ins, ty[:-2], xl, yl))
        hi = _boolop(b, ins, _compare(b, ins, ty[:-2], xh, yh))
        dests = ins.operands[0].split("|")
        if len(dests) != 2:
            raise Unsupported("setp on x2 values needs two predicates p|q")
        ins._write(dests[0], lo, 1)
        ins._write(dests[1], hi, 1)
        return
    if "|" in ins.operands[0]:
        raise Unsupported("a second predicate destination is not lifted")
    ins.dst(_boolop(b, ins, _compare(b, ins, ty, x, y)), 1)


_TRUE = {"f16": 0x3C00, "bf16": 0x3F80, "f32": 0x3F800000}


def _set(b: Builder, ins: Instr) -> None:
    dty, sty = ins.types
    w = width(dty)

    def one(x: str, y: str) -> str:
        lane = dty.removesuffix("x2")
        bits = 16 if sty.endswith("x2") else w
        p = _boolop(b, ins, _compare(b, ins, sty.removesuffix("x2"), x, y))
        true = _TRUE.get(lane, (1 << bits) - 1)
        return b(f"select i1 {p}, {ity(bits)} {P._signed(true, bits)}, {ity(bits)} 0")

    ins.dst(_per_lane(b, sty, one, [ins.src(1, width(sty)), ins.src(2, width(sty))]), w)


def _selp(b: Builder, ins: Instr) -> None:
    w = width(ins.types[0])
    t = ity(w)
    ins.dst(b(f"select i1 {ins.src(3, 1)}, {t} {ins.src(1, w)}, {t} {ins.src(2, w)}"), w)


def _mov(b: Builder, ins: Instr) -> None:
    w = width(ins.types[0])
    d, a = ins.operands
    if a.startswith("{"):  # pack: the first element is the low part
        parts = [x.strip() for x in a[1:-1].split(",")]
        pw = w // len(parts)
        acc = None
        for i, part in enumerate(parts):
            v = b(f"zext {ity(pw)} {ins._read(part, pw)} to {ity(w)}")
            v = b(f"shl {ity(w)} {v}, {i * pw}") if i else v
            acc = v if acc is None else b(f"or {ity(w)} {acc}, {v}")
        ins.dst(acc, w)
    elif d.startswith("{"):  # unpack
        parts = [x.strip() for x in d[1:-1].split(",")]
        pw = w // len(parts)
        v = ins.src(1, w)
        for i, part in enumerate(parts):
            s = b(f"lshr {ity(w)} {v}, {i * pw}") if i else v
            if part != "_":
                ins._write(part, b(f"trunc {ity(w)} {s} to {ity(pw)}"), pw)
    else:
        ins.dst(b(f"add {ity(w)} {ins.src(1, w)}, 0"), w)


def _bits(b: Builder, ins: Instr) -> None:
    w = width(ins.types[0])
    t = ity(w)
    if ins.opcode == "not":
        ins.dst(b(f"xor {t} {ins.src(1, w)}, -1"), w)
    else:
        ins.dst(b(f"{ins.opcode} {t} {ins.src(1, w)}, {ins.src(2, w)}"), w)


# ---- memory --------------------------------------------------------------------------------------
# `ld`/`st` of one scalar in the generic or .global space: the address is a 64-bit register or
# operand plus an optional constant offset (`[$0]`, `[%rd1+8]`); the executor's addresses are the
# host's, so the access is a plain LLVM load or store, which the rewrite then counts and checks
# like any other. Vectors (.v2/.v4) and the other state spaces are not lifted.
MEM_MODS = {"global", "volatile", "weak", "relaxed", "gpu", "sys", "cta", "ca", "cg", "cs", "lu",
            "cv", "wb", "wt", "nc"}


def _address(b: Builder, ins: Instr, tok: str) -> str:
    tok = tok.strip()
    if not (tok.startswith("[") and tok.endswith("]")):
        raise Unsupported(f"address operand `{tok}`")
    inner = tok[1:-1].replace(" ", "")
    base, sign, off = inner, "", "0"
    for i in range(1, len(inner)):
        if inner[i] in "+-":
            base, sign, off = inner[:i], inner[i], inner[i + 1:]
            break
    a = ins._read(base, 64)
    if sign:
        k = int(off.rstrip("uU"), 0) * (-1 if sign == "-" else 1)
        a = b(f"add i64 {a}, {k}")
    return b(f"inttoptr i64 {a} to ptr")


def _memory(b: Builder, ins: Instr) -> None:
    w = width(ins.types[0])
    vol = "volatile " if "volatile" in ins.mods else ""
    if ins.opcode == "st":
        p = _address(b, ins, ins.operands[0])
        b.lines.append(f"  store {vol}{ity(w)} {ins.src(1, w)}, ptr {p}, align {max(w // 8, 1)}")
        return
    p = _address(b, ins, ins.operands[1])
    v = b(f"load {vol}{ity(w)}, ptr {p}, align {max(w // 8, 1)}")
    rw = ins.reg_width(0)
    if rw > w and ins.types[0].startswith("s"):  # a signed load fills the wider register
        v, w = b(f"sext {ity(w)} {v} to {ity(rw)}"), rw
    ins.dst(v, w)


# ---- conversions ---------------------------------------------------------------------------------
def _cvt_float(b: Builder, ins: Instr, x: str, dty: str, exact: bool) -> str:
    """A double (exact, or rounded to odd) converted to the float type `dty`."""
    fmt = _fmt(dty)
    mode = ins.rnd(None)
    if mode is None and not exact:
        raise Unsupported("a narrowing conversion needs a rounding modifier")
    if dty == "f32" and mode not in (None, "rn"):
        raise Unsupported("only .rn rounding to .f32 is lifted")
    r = P.round_double(b, _clamp(b, x, ins), fmt, mode or "rn")
    return P.flush(b, r, fmt) if "ftz" in ins.mods and fmt is P.F32 else r


def _cvt(b: Builder, ins: Instr) -> None:
    dty, aty = ins.types
    irnd = ins.mods & IROUND
    if dty.endswith("x2"):  # two f32 values: the first into the upper half
        hi, lo = (P.decode(b, ins.src(i, 32), P.F32) for i in (1, 2))
        ins.dst(_pack(b, _cvt_float(b, ins, lo, dty[:-2], False),
                      _cvt_float(b, ins, hi, dty[:-2], False)), 32)
        return
    if aty in FLOAT_TYPES:
        afmt = _fmt(aty)
        v = ins.src(1, afmt.bits)
        v = P.flush(b, v, afmt) if "ftz" in ins.mods and afmt is P.F32 else v
        x = P.decode(b, v, afmt)
        if dty in INT_TYPES:
            if len(irnd) != 1:
                raise Unsupported("a float-to-integer conversion needs .rni/.rzi/.rmi/.rpi")
            reg = max(width(dty), ins.reg_width(0))
            ins.dst(P.to_int(b, x, next(iter(irnd)), width(dty), dty[0] == "s", reg,
                             aty == "f64"), reg)
            return
        if irnd:  # to an integral value in the same type
            if dty != aty:
                raise Unsupported("integer rounding needs equal types")
            fn = {"rni": "roundeven", "rzi": "trunc", "rmi": "floor", "rpi": "ceil"}
            x = b.call("double", f"llvm.{fn[next(iter(irnd))]}.f64", f"double {x}")
            exact = True
        else:
            dfmt = _fmt(dty)
            exact = dfmt.frac >= afmt.frac and dfmt.bias >= afmt.bias
        ins.dst(_cvt_float(b, ins, x, dty, exact), width(dty))
        return
    x = P.int_to_double(b, ins.src(1, width(aty)), width(aty), aty[0] == "s")
    if ins.rnd(None) is None:
        raise Unsupported("an integer-to-float conversion needs a rounding modifier")
    ins.dst(_cvt_float(b, ins, x, dty, False), width(dty))


# ---- the table -----------------------------------------------------------------------------------
def _table() -> dict[str, Entry]:
    t: dict[str, Entry] = {}

    def add(key: str, mods: set[str], handler: Callable) -> None:
        t[key] = Entry(key, frozenset(mods), handler)

    half, bf = ("f16", "f16x2"), ("bf16", "bf16x2")
    for op in ("add", "sub", "mul", "fma"):
        relu = {"relu"} if op == "fma" else set()
        for ty in half:
            add(f"{op}.{ty}", {"rn", "ftz", "sat"} | relu, _arith)
        for ty in bf:
            add(f"{op}.{ty}", {"rn"} | relu, _arith)
        add(f"{op}.f32", {"rn", "ftz", "sat"}, _arith)
    for op in ("neg", "abs"):
        for ty in (*half, "f32"):
            add(f"{op}.{ty}", {"ftz"}, _sign)
        for ty in bf:
            add(f"{op}.{ty}", set(), _sign)
    for op in ("min", "max"):
        for ty in (*half, "f32"):
            add(f"{op}.{ty}", {"ftz", "NaN"}, _minmax)
        for ty in bf:
            add(f"{op}.{ty}", {"NaN"}, _minmax)
    for op, mods in (("rcp", {"approx", "rn", "ftz"}), ("sqrt", {"approx", "rn", "ftz"}),
                     ("rsqrt", {"approx", "ftz"}), ("ex2", {"approx", "ftz"}),
                     ("lg2", {"approx", "ftz"}), ("sin", {"approx", "ftz"}),
                     ("cos", {"approx", "ftz"}), ("tanh", {"approx"}),
                     ("div", {"approx", "full", "rn", "ftz"})):
        add(f"{op}.f32", mods, _func)
    for ty in (*half, *bf):  # ex2.approx.ftz.bf16; no .ftz for f16
        add(f"ex2.{ty}", {"approx", "ftz"} if ty in bf else {"approx"}, _func)
        add(f"tanh.{ty}", {"approx"}, _func)
    cmp = set(_FCMP) | {"ftz", "and", "or", "xor"}
    for ty in (*half, *bf, "f32"):
        add(f"setp.{ty}", cmp, _setp)
    signed = {"eq", "ne", "lt", "le", "gt", "ge"}
    for ty, ops in (("b16", {"eq", "ne"}), ("b32", {"eq", "ne"}), ("s16", signed),
                    ("s32", signed), ("u16", set(_ICMP)), ("u32", set(_ICMP))):
        add(f"setp.{ty}", ops | {"and", "or", "xor"}, _setp)
    for sty in ("f16", "bf16", "f32"):
        for dty in ("u16", "s16", "u32", "s32", sty):
            add(f"set.{dty}.{sty}", cmp, _set)
    for sty in ("f16x2", "bf16x2"):
        for dty in ("u32", "s32", sty):
            add(f"set.{dty}.{sty}", cmp, _set)
    for ty in ("b16", "b32", "b64", "u16", "u32", "s16", "s32", "f32"):
        add(f"selp.{ty}", set(), _selp)
        add(f"mov.{ty}", set(), _mov)
    for op in ("and", "or", "xor", "not"):
        for ty in ("pred", *BIT_TYPES):
            add(f"{op}.{ty}", set(), _bits)
    fmods = ROUND | {"ftz", "sat", "relu"}
    for aty in FLOAT_TYPES:
        for dty in FLOAT_TYPES:
            add(f"cvt.{dty}.{aty}", fmods | (IROUND if dty == aty else set()), _cvt)
        for dty in INT_TYPES:
            add(f"cvt.{dty}.{aty}", IROUND | {"ftz", "sat"}, _cvt)
    for aty in INT_TYPES:
        for dty in ("f16", "bf16", "f32"):
            add(f"cvt.{dty}.{aty}", ROUND | {"sat", "relu"}, _cvt)
    for dty in ("f16x2", "bf16x2"):
        add(f"cvt.{dty}.f32", {"rn", "rz", "relu"}, _cvt)
    for op in ("ld", "st"):
        for ty in ("f32", "f64", "b8", "b16", "b32", "b64", *INT_TYPES):
            add(f"{op}.{ty}", MEM_MODS, _memory)
    return t


TABLE: dict[str, Entry] = _table()
TYPES = frozenset({*FLOAT_TYPES, *INT_TYPES, *BIT_TYPES, "f16x2", "bf16x2", "pred", "b8"})
