"""The lifted-PTX table (sirius/runtime/cpu/ptxops.py), one test per entry: each entry's
instruction, with every rounding mode and modifier it accepts, is lifted from an asm template,
JIT-compiled and run over edge values (zeros, subnormals, min/max normal, infinities, NaNs, ties,
all 65536 patterns for half and bfloat sources) and random values, and compared bit for bit
with the reference in tests/runtime/ptxref.py (numpy float16 and exact rational arithmetic;
`.approx` functions within the error bound the PTX ISA documents)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from sirius.runtime.cpu import ptxlift
from sirius.runtime.cpu.ptxops import TABLE, width
from tests.runtime import ptxref as R

ALL16 = np.arange(1 << 16, dtype=np.uint16)


def lane(ty: str) -> str:
    return ty.removesuffix("x2")


def check(out, ref, ty: str, what: str, inputs=()) -> None:
    """Bitwise equality; a NaN reference needs a NaN (of any payload)."""
    bad = []
    for i, (o, r) in enumerate(zip(out.tolist(), ref, strict=True)):
        if ty in R.FMT and R.is_nan_bits(r, ty):
            ok = R.is_nan_bits(o, ty)
        else:
            ok = o == r
        if not ok:
            bad.append((i, [hex(int(x[i])) for x in inputs], hex(o), hex(r)))
    assert not bad, f"{what}: {len(bad)} of {len(ref)} differ, first {bad[:5]}"


def split(v: np.ndarray, ty: str) -> list[np.ndarray]:
    if not ty.endswith("x2"):
        return [v]
    v = v.astype(np.uint32)
    return [(v & 0xFFFF).astype(np.uint16), (v >> 16).astype(np.uint16)]


def join(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)


def operands(ty: str, n: int, seed: int = 0) -> list[np.ndarray]:
    """n-ary inputs for arithmetic on `ty`: edge pairs and random values (x2: two lanes)."""
    lt = lane(ty)
    a, b = R.pairs(lt, 3000, seed)
    c = R.random_bits(lt, len(a), seed + 7)
    if n == 3:  # fma: also products cancelled by c (the hard rounding cases)
        prod = R.to_f64(a, lt) * R.to_f64(b, lt)
        near = np.array([R.round_exact(-float(p), lt) if math.isfinite(p) else 0 for p in prod],
                        dtype=a.dtype)
        c = np.where(np.arange(len(a)) % 2 == 0, c, near ^ (np.arange(len(a)) % 4 == 1))
    ins = [a, b, c][:n]
    if ty.endswith("x2"):
        ins = [join(x, np.roll(x, 17)) for x in ins]
    return ins


# ---- arithmetic ----------------------------------------------------------------------------------
def ref_arith(op: str, lt: str, mods: set[str], *bits: int) -> int:
    if "ftz" in mods:
        bits = tuple(R.flush(x, lt) for x in bits)
    xs = [R.dec(x, lt) for x in bits]
    if op == "sub":
        op, xs[1] = "add", -xs[1]
    f = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b,
         "fma": lambda a, b, c: a * b + c}[op]
    approx = f(*xs)  # float64: right for specials and for the sign of an exact zero
    if all(math.isfinite(x) for x in xs):
        x = f(*[Fraction(v) for v in xs])
        neg_zero = x == 0 and math.copysign(1, approx) < 0
    else:
        x, neg_zero = approx, False
    if "sat" in mods:
        if isinstance(x, float) and math.isnan(x):
            x = 0.0
        x = min(max(x, 0), 1)
        neg_zero = False
    if "relu" in mods and not (isinstance(x, float) and math.isnan(x)) and x < 0:
        x = 0
    r = R.round_exact(x, lt, "rn", neg_zero)
    return R.flush(r, lt) if "ftz" in mods else r


def t_arith(key: str) -> None:
    op, ty = key.split(".")
    e = TABLE[key]
    n = 3 if op == "fma" else 2
    ins = operands(ty, n)
    w = width(ty)
    for mod in ["", *sorted(e.mods & {"ftz", "sat", "relu"})]:
        mods = {mod} - {""}
        opcode = ".".join([op, "rn", *mods, ty])
        out = R.elementwise(opcode, w, (w,) * n).run(*ins)
        for part, (o, *xs) in enumerate(zip(split(out, ty), *[split(x, ty) for x in ins],
                                            strict=True)):
            ref = [ref_arith(op, lane(ty), mods, *v) for v in zip(*[x.tolist() for x in xs],
                                                                    strict=True)]
            check(o, ref, lane(ty), f"{opcode} lane {part}", xs)
    if ty == "f16" and op in ("add", "sub", "mul"):  # numpy float16 agrees
        a, b = (x.view(np.float16) for x in ins)
        with np.errstate(all="ignore"):
            npr = {"add": a + b, "sub": a - b, "mul": a * b}[op].view(np.uint16)
        out = R.elementwise(f"{op}.f16", 16, (16, 16)).run(*ins)
        check(out, npr.tolist(), "f16", f"{op}.f16 vs numpy", ins)


def t_sign(key: str) -> None:
    op, ty = key.split(".")
    lt = lane(ty)
    sign = 1 << (R.FMT[lt].bits - 1)
    x = ALL16 if lt != "f32" else R.random_bits("f32", 4000, 3)
    x = join(x, np.roll(x, 5)) if ty.endswith("x2") else x
    for mods in [set(), *([{"ftz"}] if "ftz" in TABLE[key].mods else [])]:
        opcode = ".".join([op, *mods, ty])
        out = R.elementwise(opcode, width(ty), (width(ty),)).run(x)
        for o, v in zip(split(out, ty), split(x, ty), strict=True):
            vv = [R.flush(b, lt) if mods else b for b in v.tolist()]
            ref = [(b ^ sign) if op == "neg" else (b & (sign - 1)) for b in vv]
            check(o, ref, lt, opcode, [v])


def ref_minmax(op: str, lt: str, mods: set[str], a: int, b: int) -> int:
    if "ftz" in mods:
        a, b = R.flush(a, lt), R.flush(b, lt)
    na, nb = R.is_nan_bits(a, lt), R.is_nan_bits(b, lt)
    nan = R.FMT[lt].inf | ((1 << R.FMT[lt].frac) - 1)
    if (na and nb) or ("NaN" in mods and (na or nb)):
        return nan
    if na or nb:
        return b if na else a
    x, y = (R.dec(v, lt) for v in (a, b))
    if x == y:  # -0 < +0
        neg = [v for v in (a, b) if math.copysign(1, R.dec(v, lt)) < 0]
        if x == 0:
            return (neg[0] if neg else a) if op == "min" else \
                (a if not neg or len(neg) == 2 else [v for v in (a, b) if v not in neg][0])
        return a
    return a if (x < y) == (op == "min") else b


def t_minmax(key: str) -> None:
    op, ty = key.split(".")
    ins = operands(ty, 2, 11)
    for mod in ["", *sorted(TABLE[key].mods)]:
        mods = {mod} - {""}
        opcode = ".".join([op, *mods, ty])
        out = R.elementwise(opcode, width(ty), (width(ty),) * 2).run(*ins)
        for o, a, b in zip(split(out, ty), *[split(x, ty) for x in ins], strict=True):
            ref = [ref_minmax(op, lane(ty), mods, x, y) for x, y in zip(a.tolist(), b.tolist(),
                                                                        strict=True)]
            check(o, ref, lane(ty), opcode, [a, b])


# ---- functions: within the documented error ------------------------------------------------------
_FUNC = {"rcp": lambda x: 1 / x, "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x),
         "ex2": lambda x: 2.0 ** x, "lg2": math.log2, "sin": math.sin, "cos": math.cos,
         "tanh": math.tanh, "div": lambda x, y: x / y}
# allowed error: (relative, absolute) from the PTX ISA; .rn variants are exact
_ERR = {"rcp": (2 ** -23, 0), "sqrt": (2 ** -23, 0), "rsqrt": (2 ** -22.9, 0),
        "ex2": (2 ** -22, 0), "lg2": (2 ** -22, 2 ** -22.6), "sin": (0, 2 ** -20.9),
        "cos": (0, 2 ** -20.9), "tanh": (2 ** -10.987, 0), "div": (2 ** -22, 0)}


def func_inputs(op: str, lt: str) -> list[np.ndarray]:
    if lt != "f32":
        return [ALL16]
    r = np.random.default_rng(5)
    if op in ("sin", "cos"):
        xs = r.uniform(-math.pi, math.pi, 4000)
    elif op == "ex2":
        xs = r.uniform(-140, 130, 4000)
    else:
        xs = r.standard_normal(4000) * np.exp2(r.integers(-30, 30, 4000))
    x = np.concatenate([np.array(R.edges("f32"), dtype=np.uint32),
                        xs.astype(np.float32).view(np.uint32)])
    if op == "div":
        return [x, np.roll(x, 7)]
    return [x]


def t_func(key: str) -> None:
    op, ty = key.split(".")
    lt = lane(ty)
    fmt = R.FMT[lt]
    mods_list = [{"approx"}] + ([{"approx", "ftz"}] if "ftz" in TABLE[key].mods else []) \
        + ([{"rn"}] if "rn" in TABLE[key].mods else [])
    ins = func_inputs(op, lt)
    if ty.endswith("x2"):
        ins = [join(x, np.roll(x, 9)) for x in ins]
    for mods in mods_list:
        opcode = ".".join([op, *sorted(mods), ty])
        out = R.elementwise(opcode, width(ty), (width(ty),) * len(ins)).run(*ins)
        for o, *xs in zip(split(out, ty), *[split(x, ty) for x in ins], strict=True):
            bad = []
            for i, vals in enumerate(zip(*[x.tolist() for x in xs], strict=True)):
                if "ftz" in mods:
                    vals = [R.flush(v, lt) for v in vals]
                fv = [R.dec(v, lt) for v in vals]
                try:
                    ref = _FUNC[op](*fv)
                except (ValueError, ZeroDivisionError, OverflowError):
                    ref = _special(op, *fv)
                got_bits = int(o[i])
                if "ftz" in mods:
                    got_bits = got_bits if R.flush(got_bits, lt) == got_bits else -1
                got = R.dec(got_bits, lt) if got_bits >= 0 else math.nan
                if not _close(op, mods, lt, fmt, got, ref):
                    bad.append((i, [hex(v) for v in vals], got, ref))
            assert not bad, f"{opcode}: {len(bad)} outside the bound, first {bad[:5]}"


def _special(op: str, *x: float) -> float:
    if op in ("rcp", "div"):
        num = x[0] if op == "div" else 1.0
        den = x[-1]
        if math.isnan(num) or math.isnan(den) or (num == 0 and den == 0):
            return math.nan
        return math.copysign(math.inf, num) * math.copysign(1, den)
    if op == "rsqrt":
        return math.copysign(math.inf, x[0]) if x[0] == 0 else math.nan
    if op == "lg2":
        return -math.inf if x[0] == 0 else math.nan
    if op == "ex2":
        return math.inf if x[0] > 0 else 0.0
    return math.nan


def _close(op: str, mods: set[str], lt: str, fmt, got: float, ref: float) -> bool:
    if math.isnan(ref) or math.isnan(got):
        return math.isnan(ref) and math.isnan(got)
    if math.isinf(ref) or ref == 0:
        limit = 0 if math.isinf(ref) else 2.0 ** -149
        return got == ref or (abs(got) <= limit and not math.isinf(got))
    ulp = 2.0 ** (max(math.frexp(ref)[1] - 1, 1 - fmt.bias) - fmt.frac)
    if abs(ref) >= 2.0 ** (fmt.emax - 1 - fmt.bias) * (2 - 2.0 ** -fmt.frac):  # beyond max finite
        return math.isinf(got) or abs(got - ref) <= ulp
    if "rn" in mods:  # correctly rounded
        return got == float(R.to_f64(np.array([R.round_exact(Fraction(ref), lt)]), lt)[0]) \
            or abs(got - ref) <= 0.5 * ulp * (1 + 2 ** -40)
    rel, ab = _ERR[op]
    if "ftz" in mods and abs(ref) < 2.0 ** (1 - fmt.bias):  # a subnormal result may be flushed
        return got == 0 or abs(got - ref) <= 2 * ulp
    if lt != "f32":  # one rounding to half or bfloat on top of the f32 function
        return abs(got - ref) <= ulp + abs(ref) * rel + ab
    return abs(got - ref) <= max(abs(ref) * rel, ab, ulp)


# ---- comparisons and selection -------------------------------------------------------------------
_PY = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
       "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def cmp_ref(op: str, x: float, y: float) -> bool:
    unordered = math.isnan(x) or math.isnan(y)
    if op == "num":
        return not unordered
    if op == "nan":
        return unordered
    if op.endswith("u") and op != "neu" or op == "neu":
        return unordered or _PY[op[:-1]](x, y)
    return not unordered and _PY[op](x, y)


_ICMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "lo": "lt",
         "ls": "le", "hi": "gt", "hs": "ge"}


def compare_inputs(ty: str) -> tuple[list[np.ndarray], list[list[float]]]:
    lt = lane(ty)
    if lt in R.FMT:
        a, b = R.pairs(lt, 2000, 21)
        if ty.endswith("x2"):
            a, b = join(a, np.roll(a, 3)), join(b, np.roll(b, 3))
        return [a, b], []
    r = np.random.default_rng(4)
    w = width(ty)
    a = r.integers(0, 1 << w, 3000, dtype=np.uint64).astype(R.UINT[w])
    b = np.where(np.arange(3000) % 3 == 0, a, r.integers(0, 1 << w, 3000,
                                                         dtype=np.uint64).astype(R.UINT[w]))
    return [a, b], []


def int_value(v: int, ty: str) -> int:
    w = width(ty)
    return v - (1 << w) if ty[0] == "s" and v >> (w - 1) else v


def t_setp(key: str) -> None:
    ty = key.split(".")[1]
    lt = lane(ty)
    (a, b), _ = compare_inputs(ty)
    ops = sorted(TABLE[key].mods - {"ftz", "and", "or", "xor"})
    for op in ops:
        for bool_op in ("", "and", "or", "xor") if op in ("lt", "eq") else ("",):
            for ftz in ([False, True] if "ftz" in TABLE[key].mods and op == "lt" else [False]):
                opcode = ".".join(["setp", op, *([bool_op] if bool_op else []),
                                   *(["ftz"] if ftz else []), ty])
                _check_setp(opcode, ty, lt, op, bool_op, ftz, a, b)


def _check_setp(opcode, ty, lt, op, bool_op, ftz, a, b) -> None:
    w = width(ty)
    qs = (a ^ b) & 1  # the combined predicate: a data-dependent bit
    if ty.endswith("x2"):
        tpl = (f"{{ .reg .pred p, q, c; .reg .b16 lo, hi;\n setp.ne.b32 c, $3, 0;\n"
               f" {opcode} p|q, $1, $2{', c' if bool_op else ''};\n selp.u16 lo, 1, 0, p;\n"
               f" selp.u16 hi, 1, 0, q;\n mov.b32 $0, {{lo, hi}};}}")
        out = R.Case(tpl, "=r,r,r,r", 32, (32, 32, 32)).run(a, b, qs.astype(np.uint32))
    else:
        tpl = (f"{{ .reg .pred p, c;\n setp.ne.b32 c, $3, 0;\n"
               f" {opcode} p, $1, $2{', c' if bool_op else ''};\n selp.u16 $0, 1, 0, p;}}")
        cons = f"=h,{R.letter(w)},{R.letter(w)},r"
        out = R.Case(tpl, cons, 16, (w, w, 32)).run(a, b, qs.astype(np.uint32))
    ref = []
    for x, y, c in zip(a.tolist(), b.tolist(), qs.tolist(), strict=True):
        bits = []
        for xs, ys in ((x & 0xFFFF, y & 0xFFFF), (x >> 16, y >> 16)) if ty.endswith("x2") \
                else ((x, y),):
            if lt in R.FMT:
                if ftz:
                    xs, ys = R.flush(xs, lt), R.flush(ys, lt)
                p = cmp_ref(op, *(R.dec(v, lt) for v in (xs, ys)))
            else:
                p = _PY[_ICMP[op]](int_value(xs, ty), int_value(ys, ty))
            if bool_op:
                p = {"and": p and c, "or": p or c, "xor": p != bool(c)}[bool_op]
            bits.append(int(p))
        ref.append(bits[0] | (bits[1] << 16) if len(bits) == 2 else bits[0])
    check(out, ref, "u", opcode, [a, b])


def t_set(key: str) -> None:
    _, dty, sty = key.split(".")
    lt = lane(sty)
    (a, b), _ = compare_inputs(sty)
    true = {"f16": 0x3C00, "bf16": 0x3F80, "f32": 0x3F800000}
    for op in ("lt", "equ", "nan", "ne"):
        opcode = f"set.{op}.{dty}.{sty}"
        out = R.elementwise(opcode, width(dty), (width(sty),) * 2).run(a, b)
        lanes_w = 16 if sty.endswith("x2") else width(dty)
        t = true.get(lane(dty), (1 << lanes_w) - 1)
        ref = []
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            parts = ((x & 0xFFFF, y & 0xFFFF), (x >> 16, y >> 16)) if sty.endswith("x2") \
                else ((x, y),)
            v = 0
            for k, (xs, ys) in enumerate(parts):
                p = cmp_ref(op, *(R.dec(q, lt) for q in (xs, ys)))
                v |= (t if p else 0) << (16 * k)
            ref.append(v)
        check(out, ref, "u", opcode, [a, b])


def t_selp(key: str) -> None:
    ty = key.split(".")[1]
    w = width(ty)
    r = np.random.default_rng(8)
    a, b = (r.integers(0, 1 << w, 500, dtype=np.uint64).astype(R.UINT[w]) for _ in range(2))
    c = r.integers(0, 2, 500, dtype=np.uint32)
    tpl = f"{{ .reg .pred p;\n setp.ne.u32 p, $3, 0;\n selp.{ty} $0, $1, $2, p;}}"
    out = R.Case(tpl, f"={R.letter(w)},{R.letter(w)},{R.letter(w)},r", w, (w, w, 32)).run(a, b, c)
    check(out, np.where(c != 0, a, b).tolist(), "u", key, [a, b, c])


def t_mov(key: str) -> None:
    ty = key.split(".")[1]
    w = width(ty)
    r = np.random.default_rng(9)
    a, b = (r.integers(0, 1 << (w // 2), 500, dtype=np.uint64) for _ in range(2))
    if w >= 32 and ty[0] == "b":  # packing and unpacking halves
        h = w // 2
        pk = R.Case(f"{{ mov.{ty} $0, {{$1, $2}};}}", f"={R.letter(w)},{R.letter(h)},"
                    f"{R.letter(h)}", w, (h, h)).run(a, b)
        check(pk, (a | (b << h)).tolist(), "u", f"{key} pack", [a, b])
        hb = f"b{h}"
        up = R.Case(f"{{ .reg .{hb} lo, hi;\n mov.{ty} {{lo, hi}}, $1;\n mov.{hb} $0, hi;}}",
                    f"={R.letter(h)},{R.letter(w)}", h, (w,)).run(pk)
        check(up, b.tolist(), "u", f"{key} unpack", [pk])
    x = r.integers(0, 1 << w, 500, dtype=np.uint64).astype(R.UINT[w])
    out = R.elementwise(key, w, (w,)).run(x)
    check(out, x.tolist(), "u", key, [x])


def t_bits(key: str) -> None:
    op, ty = key.split(".")
    r = np.random.default_rng(10)
    if ty == "pred":
        a, b = (r.integers(0, 2, 400, dtype=np.uint32) for _ in range(2))
        src = "c" if op == "not" else "c, d"
        tpl = (f"{{ .reg .pred c, d, p;\n setp.ne.u32 c, $1, 0;\n setp.ne.u32 d, $2, 0;\n"
               f" {op}.pred p, {src};\n selp.u32 $0, 1, 0, p;}}")
        out = R.Case(tpl, "=r,r,r", 32, (32, 32)).run(a, b)
        w, mask = 1, 1
    else:
        w = width(ty)
        mask = (1 << w) - 1
        a, b = (r.integers(0, 1 << w, 400, dtype=np.uint64).astype(R.UINT[w]) for _ in range(2))
        out = R.elementwise(key, w, (w,) if op == "not" else (w, w)).run(
            *((a,) if op == "not" else (a, b)))
    f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
         "not": lambda x, y: ~x & mask}[op]
    check(out, [f(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)], "u", key, [a, b])


# ---- conversions ---------------------------------------------------------------------------------
def cvt_inputs(aty: str) -> np.ndarray:
    if aty in ("f16", "bf16"):
        return ALL16
    if aty in ("f32", "f64"):
        r = np.random.default_rng(12)
        ft = np.float32 if aty == "f32" else np.float64
        halves = R.to_f64(R.random_bits("f16", 2000, 13), "f16")
        nxt = R.to_f64(R.random_bits("f16", 2000, 13) + np.uint16(1), "f16")
        bfs = R.to_f64(R.random_bits("bf16", 2000, 14), "bf16")
        bnx = R.to_f64(R.random_bits("bf16", 2000, 14) + np.uint16(1), "bf16")
        with np.errstate(all="ignore"):
            mids = np.concatenate([(halves + nxt) / 2, (bfs + bnx) / 2])  # ties
        vals = np.concatenate([
            mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
            r.standard_normal(3000) * np.exp2(r.integers(-30, 30, 3000)),
            [65504, 65519.99, 65520, 65536, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -26,
             1e30, 3.4e38, 2.5, 3.5, -2.5, -0.5, 0.5, 1.5, 2.0 ** 31, 2.0 ** 31 - 128,
             -(2.0 ** 31), 2.0 ** 63, 2.0 ** 64, -(2.0 ** 63), 255.5, 256, -128.5, -129,
             32767.5, 65535.5, -32768.5, 4294967295.0, 2.0 ** 100]]).astype(ft)
        edges = np.array(R.edges(aty), dtype=R.UINT[width(aty)])
        return np.concatenate([edges, vals.view(R.UINT[width(aty)])])
    w = width(aty)
    r = np.random.default_rng(15)
    special = [0, 1, 2, 3, 65504, 65519, 65520, 65521, 65535, (1 << 24) + 1, (1 << 53) + 1,
               (1 << 31) - 1, 1 << 31, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 127, 128, 255,
               (1 << 24) + 3, 2049, 2051, 4097, 257, 259]
    m = (1 << w) - 1
    vals = [v & m for v in special] + [(-v) & m for v in special]
    rnd = r.integers(0, 1 << w, 3000, dtype=np.uint64)
    small = r.integers(0, 1 << min(w, 18), 2000, dtype=np.uint64)
    return np.concatenate([np.array(vals, dtype=np.uint64), rnd, small]).astype(R.UINT[w])


def int_range(ty: str) -> tuple[int, int]:
    w = width(ty)
    return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if ty[0] == "s" else (0, (1 << w) - 1)


# the rounding to an integer of each .rXi modifier, exact on a finite float
_TO_INT = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}


def ref_cvt(dty: str, aty: str, mods: set[str], v: int, regw: int) -> int:
    afloat = aty in R.FMT
    if afloat:
        if "ftz" in mods and aty == "f32":
            v = R.flush(v, aty)
        x = R.dec(v, aty)
    else:
        x = int_value(v, aty)
    if dty not in R.FMT:  # float -> int
        lo, hi = int_range(dty)
        if math.isnan(x):  # MININT, or (MAXINT >> 1) + 1 for unsigned types
            r = (lo if dty[0] == "s" else 1 << (width(dty) - 1)) \
                if (width(dty) == 64 or aty == "f64") else 0
        else:
            if math.isinf(x):
                r = hi if x > 0 else lo
            else:  # an exact integer (Python's round: to nearest, ties to even, as rint)
                r = min(max(_TO_INT[next(iter(mods & set(_TO_INT)))](x), lo), hi)
        if r < 0 and regw > width(dty):
            r += 1 << regw
        return r & ((1 << regw) - 1)
    mode = next(iter(mods & {"rn", "rz", "rm", "rp"}), "rn")
    irnd = mods & {"rni", "rzi", "rmi", "rpi"}
    if irnd:
        if math.isfinite(x):  # NaN and infinities round to themselves; a zero keeps x's sign
            x = math.copysign(float(_TO_INT[next(iter(irnd))](x)) or 0.0, x)
    if isinstance(x, int):
        x = Fraction(x)
    if "sat" in mods:
        if isinstance(x, float) and math.isnan(x):
            x = 0.0
        x = 0.0 if x <= 0 else (1.0 if x > 1 else x)
    if "relu" in mods and not (isinstance(x, float) and math.isnan(x)) and x < 0:
        x = 0.0
    r = R.round_exact(x, dty, mode)
    return R.flush(r, dty) if "ftz" in mods and dty == "f32" else r


def cvt_variants(key: str) -> list[set[str]]:
    _, dty, aty = key.split(".")
    mods = TABLE[key].mods
    if dty.endswith("x2"):
        return [{"rn"}, {"rz"}, {"rn", "relu"}]
    if dty not in R.FMT:
        return [{m} for m in sorted(mods & {"rni", "rzi", "rmi", "rpi"})] + \
            ([{"rzi", "ftz"}] if aty == "f32" else [])
    out: list[set[str]] = []
    exact = aty in R.FMT and R.FMT[dty].frac >= R.FMT[aty].frac and \
        R.FMT[dty].bias >= R.FMT[aty].bias and dty != aty
    if exact:
        out.append(set())
    if dty == aty:
        out += [{m} for m in ("rni", "rzi", "rmi", "rpi")]
    elif dty == "f32":
        out.append({"rn"})
    else:
        out += [{m} for m in ("rn", "rz", "rm", "rp")]
        if aty in R.FMT:
            out += [{"rn", "sat"}, {"rn", "relu"}]
    return out


def t_cvt(key: str) -> None:
    _, dty, aty = key.split(".")
    x = cvt_inputs(aty)
    if dty.endswith("x2"):
        y = np.roll(x, 11)
        for mods in cvt_variants(key):
            opcode = ".".join(["cvt", *sorted(mods), dty, aty])
            out = R.elementwise(opcode, 32, (32, 32)).run(x, y)
            ref = [ref_cvt(lane(dty), aty, mods, b, 16) | (ref_cvt(lane(dty), aty, mods, a, 16)
                                                           << 16)
                   for a, b in zip(x.tolist(), y.tolist(), strict=True)]
            lo = [r & 0xFFFF for r in ref]
            hi = [r >> 16 for r in ref]
            check((out & 0xFFFF).astype(np.uint16), lo, lane(dty), opcode + " lo", [x, y])
            check((out >> 16).astype(np.uint16), hi, lane(dty), opcode + " hi", [x, y])
        return
    aw = max(width(aty), 16)
    dw = max(width(dty), 16)
    for mods in cvt_variants(key):
        opcode = ".".join(["cvt", *sorted(mods), dty, aty])
        out = R.elementwise(opcode, dw, (aw,)).run(x.astype(R.UINT[aw]))
        ref = [ref_cvt(dty, aty, mods, v, dw) for v in x.tolist()]
        check(out, ref, dty if dty in R.FMT else "u", opcode, [x])
    if key == "cvt.f16.f32":  # numpy float16 agrees with .rn
        out = R.elementwise("cvt.rn.f16.f32", 16, (32,)).run(x)
        with np.errstate(all="ignore"):
            npr = x.view(np.float32).astype(np.float16).view(np.uint16)
        check(out, npr.tolist(), "f16", "cvt.rn.f16.f32 vs numpy", [x])


# ---- memory ------------------------------------------------------------------------------------
def t_memory(key: str) -> None:
    """`ld`/`st` of one element at an address operand plus an offset (none, +8, -8), generic and
    .global: a load gives the element (sign- or zero-extended into a wider register), a store
    writes exactly the element's bytes."""
    op, ty = key.split(".")
    w = width(ty)
    rw = max(w, 16)  # the register it goes through (8-bit types use a 16-bit one)
    size, n = w // 8, 64
    rng = np.random.default_rng(w)
    for space, off in (("", ""), (".global", "+8"), (".global.volatile", "-8")):
        k = int(off or "0")
        buf = rng.integers(0, 256, (n + 4) * size, dtype=np.uint8)
        elems = buf[2 * size:(n + 2) * size].copy().view(R.UINT[w])
        addr = (buf.ctypes.data + 2 * size + np.arange(n, dtype=np.uint64) * size
                - np.uint64(k & (2 ** 64 - 1))).astype(np.uint64)
        if op == "ld":
            out = R.Case(f"ld{space}.{ty} $0, [$1{off}];", f"={R.letter(rw)},l", rw,
                         (64,)).run(addr)
            ref = elems.astype(R.UINT[rw])
            if ty.startswith("s") and rw > w:
                ref = elems.view(f"int{w}").astype(f"int{rw}").view(R.UINT[rw])
            assert np.array_equal(out, ref), (key, space, off)
        else:
            vals = rng.integers(0, 2 ** rw, n, dtype=R.UINT[rw])
            before = buf.copy()
            R.Case(f"{{st{space}.{ty} [$1{off}], $2; mov.b16 $0, 0;}}", f"=h,l,{R.letter(rw)}",
                   16, (64, rw)).run(addr, vals)
            want = before.copy()
            want[2 * size:(n + 2) * size] = (vals & ((1 << w) - 1)).astype(R.UINT[w]).view(
                np.uint8)
            assert np.array_equal(buf, want), (key, space, off)


def test_memory_refusals() -> None:
    """Shared, local and vector accesses are not lifted, and the refusal says which."""
    for tpl, why in (("st.shared.f32 [$0], $1;", "modifier .shared"),
                     ("st.global.v2.f32 [$0], {$1, $1};", "modifier .v2"),
                     ("st.global.f32 $0, $1;", "address operand")):
        line = f'  call void asm sideeffect "{tpl}", "l,f,~{{memory}}"(ptr %p, float %x)'
        assert ptxlift.lift(line).lifted == 0, tpl
        assert why in ptxlift.refusal(line), ptxlift.refusal(line)


# ---- one test per entry --------------------------------------------------------------------------
_FAMILY = {"add": t_arith, "sub": t_arith, "mul": t_arith, "fma": t_arith, "neg": t_sign,
           "abs": t_sign, "min": t_minmax, "max": t_minmax, "rcp": t_func, "sqrt": t_func,
           "rsqrt": t_func, "ex2": t_func, "lg2": t_func, "sin": t_func, "cos": t_func,
           "tanh": t_func, "div": t_func, "setp": t_setp, "set": t_set, "selp": t_selp,
           "mov": t_mov, "and": t_bits, "or": t_bits, "xor": t_bits, "not": t_bits,
           "cvt": t_cvt, "ld": t_memory, "st": t_memory}


def _entries() -> list:
    """Every entry; conversions from a half or bfloat to an integer or to/from f64 (each runs all
    65536 source patterns under every rounding modifier, 2-12 s) are in make test-all, except
    one of each kind, which stays in make test."""
    keep = {"cvt.s32.f16", "cvt.u8.bf16", "cvt.f64.f16", "cvt.bf16.f64"}
    out = []
    for key in sorted(TABLE):
        parts = key.split(".")
        heavy = parts[0] == "cvt" and (
            (parts[2] in ("f16", "bf16") and parts[1][0] in "su")
            or "f64" in parts[1:] and ("f16" in parts[1:] or "bf16" in parts[1:])
            or set(parts[1:]) == {"f16", "bf16"})
        out.append(pytest.param(key, marks=[pytest.mark.slow] if heavy and key not in keep
                                else []))
    return out


@pytest.mark.parametrize("key", _entries())
def test_entry(key: str) -> None:
    _FAMILY[key.split(".")[0]](key)


def test_reference_rounding_agrees_with_numpy() -> None:
    """The exact reference rounding is numpy's float16 rounding on f32 values, ties included."""
    x = cvt_inputs("f32")
    ref = [R.round_exact(R.exact(float(v)), "f16") for v in x.view(np.float32)]
    with np.errstate(all="ignore"):
        npr = x.view(np.float32).astype(np.float16).view(np.uint16)
    check(npr, ref, "f16", "numpy vs reference", [x])


def test_templates_from_the_headers_are_lifted() -> None:
    """Templates as cuda_fp16.hpp/cuda_bf16.hpp spell them (scopes, `$$` registers, predicates,
    `mov.b32 {lo,hi}`, hexp's special-case corrections) lift; an unknown instruction is refused
    with the template's text."""
    hexp = ("{.reg.b32 f, C, nZ;\n .reg.b16 h,r;\n  mov.b16 h,$1;\n  cvt.f32.f16 f,h;\n"
            "  mov.b32 C, 0x3fb8aa3bU;\n  mov.b32 nZ, 0x80000000U;\n  fma.rn.f32 f,f,C,nZ;\n"
            "  ex2.approx.ftz.f32 f,f;\n  cvt.rn.f16.f32 r,f;\n{.reg.b16 spc, ulp, p;\n"
            "  mov.b16 spc,0X1F79U;\n  mov.b16 ulp,0x9400U;\n  set.eq.f16.f16 p,h, spc;\n"
            "  fma.rn.f16 r,p,ulp,r;\n}\n  mov.b16 $0,r;\n}")
    out = R.Case(hexp, "=h,h", 16, (16,)).run(ALL16)
    x = R.to_f64(ALL16, "f16")
    with np.errstate(all="ignore"):
        ref = np.exp(x)
    got = R.to_f64(out, "f16")
    finite = np.isfinite(ref) & (np.abs(ref) < 65504)
    rel = np.abs(got[finite] - ref[finite]) / np.maximum(np.abs(ref[finite]), 2.0 ** -14)
    assert rel.max() < 2.0 ** -9, rel.max()  # hexp: within one half ulp-ish
    lt = R.Case("{ .reg .pred __$$temp3;\n  setp.lt.f16  __$$temp3, $1, $2;\n"
                "  selp.u16 $0, 1, 0, __$$temp3;}", "=h,h,h", 16, (16, 16))
    a, b = R.pairs("f16", 100, 3)
    check(lt.run(a, b), [int(cmp_ref("lt", *(float(v) for v in p)))
                         for p in zip(R.to_f64(a, "f16"), R.to_f64(b, "f16"), strict=True)],
          "u", "hlt", [a, b])
    line = ('  %r = call i32 asm "{brev.b32 $0, $1;}", "=r,r"(i32 %x)')
    assert ptxlift.lift(line).lifted == 0
    assert "brev.b32" in ptxlift.refusal(line) and "not in the table" in ptxlift.refusal(line)
