"""LLVM IR for the floating-point semantics of PTX's half, bfloat, float and integer conversions.

The building blocks of `ptxlift.py`. Every value is an SSA name (or an integer constant) held as
an integer of its PTX register width; a float is decoded from its bits exactly and encoded back
with the rounding PTX states. One path serves every rounding: the exact result (or, where it is
not a double, the double rounded to odd: the last bit set when anything was lost) is rounded to
odd to float, then to the target format with the requested mode. Rounding to odd first and then
to a format at least two bits narrower gives the correctly rounded result for every mode, so
there is no double-rounding error (Boldo and Melquiond, "When double rounding is odd", 2005).
NaN results of half and bfloat operations are the canonical NaN `0x7FFF`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Fmt:
    """A binary floating-point format: width, exponent bias, fraction bits, all-ones exponent."""
    bits: int
    bias: int
    frac: int
    emax: int

    @property
    def inf(self) -> int:
        return self.emax << self.frac

    @property
    def nan(self) -> int:  # canonical NaN: every fraction bit set, sign clear
        return (self.inf | ((1 << self.frac) - 1))


F16 = Fmt(16, 15, 10, 31)
BF16 = Fmt(16, 127, 7, 255)
F32 = Fmt(32, 127, 23, 255)
F64 = Fmt(64, 1023, 52, 2047)
FMTS = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64}
MODES = ("rn", "rz", "rm", "rp")


@dataclass
class Builder:
    """Emits the body of one lifted function: `b("add i32 %x, 1")` appends `%vN = ...`."""
    lines: list[str] = field(default_factory=list)
    decls: dict[str, str] = field(default_factory=dict)  # callee -> declaration
    n: int = 0

    def __call__(self, rhs: str) -> str:
        self.n += 1
        name = f"%v{self.n}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def call(self, ret: str, fn: str, *args: str) -> str:
        params = ", ".join(a.split(" ", 1)[0] for a in args)
        self.decls[fn] = f"declare {ret} @{fn}({params})"
        return self(f"call {ret} @{fn}({', '.join(args)})")


def ity(bits: int) -> str:
    return "i1" if bits == 1 else f"i{bits}"


# ---- decoding ------------------------------------------------------------------------------------
def decode_f32(b: Builder, v: str, fmt: Fmt) -> str:
    """The exact float value of a half or bfloat (or the float of f32 bits)."""
    if fmt is F32:
        return b(f"bitcast i32 {v} to float")
    w = b(f"zext i16 {v} to i32")
    if fmt is BF16:
        return b(f"bitcast i32 {b(f'shl i32 {w}, 16')} to float")
    a = b(f"and i32 {w}, 32767")
    sign = b(f"shl i32 {b(f'and i32 {w}, 32768')}, 16")
    e = b(f"lshr i32 {a}, 10")
    moved = b(f"shl i32 {a}, 13")
    normal = b(f"add i32 {moved}, 939524096")          # rebias 15 -> 127: + 112 << 23
    special = b(f"or i32 {moved}, 2139095040")         # infinities and NaNs
    mf = b(f"uitofp i32 {b(f'and i32 {a}, 1023')} to float")
    sub = b(f"bitcast float {b(f'fmul float {mf}, 0x3E70000000000000')} to i32")  # * 2^-24
    r = b(f"select i1 {b(f'icmp eq i32 {e}, 31')}, i32 {special}, i32 {normal}")
    r = b(f"select i1 {b(f'icmp eq i32 {e}, 0')}, i32 {sub}, i32 {r}")
    return b(f"bitcast i32 {b(f'or i32 {r}, {sign}')} to float")


def decode(b: Builder, v: str, fmt: Fmt) -> str:
    """The exact double value of bits `v` in `fmt`."""
    if fmt is F64:
        return b(f"bitcast i64 {v} to double")
    return b(f"fpext float {decode_f32(b, v, fmt)} to double")


def is_nan(b: Builder, v: str, fmt: Fmt) -> str:
    t = ity(fmt.bits)
    mag = b(f"and {t} {v}, {(1 << (fmt.bits - 1)) - 1}")
    return b(f"icmp ugt {t} {mag}, {fmt.inf}")


def flush(b: Builder, v: str, fmt: Fmt) -> str:
    """`.ftz`: a subnormal becomes zero of the same sign."""
    t = ity(fmt.bits)
    sign = 1 << (fmt.bits - 1)
    exp = b(f"and {t} {v}, {fmt.inf}")
    sub = b(f"icmp eq {t} {exp}, 0")
    return b(f"select i1 {sub}, {t} {b(f'and {t} {v}, {_signed(sign, fmt.bits)}')}, {t} {v}")


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits > 1 and v >> (bits - 1) else v


# ---- rounding ------------------------------------------------------------------------------------
def add_odd(b: Builder, p: str, c: str) -> str:
    """p + c (doubles) rounded to odd: the sum, its last bit set when the addition was inexact
    (TwoSum gives the exact error)."""
    s = b(f"fadd double {p}, {c}")
    bb = b(f"fsub double {s}, {p}")
    t1 = b(f"fsub double {s}, {bb}")
    err = b(f"fadd double {b(f'fsub double {p}, {t1}')}, {b(f'fsub double {c}, {bb}')}")
    inexact = b(f"fcmp one double {err}, 0.0")
    return _to_odd(b, s, "double", 64, inexact, b(f"bitcast double {err} to i64"))


def _to_odd(b: Builder, r: str, fty: str, bits: int, inexact: str, toward: str) -> str:
    """Round-to-odd correction of a round-to-nearest result `r`: when inexact and even, step
    one ulp towards the exact value (`toward` has the bits of (exact - r) or, for the sign test,
    of anything with that sign)."""
    t = ity(bits)
    rb = b(f"bitcast {fty} {r} to {t}")
    even = b(f"icmp eq {t} {b(f'and {t} {rb}, 1')}, 0")
    fix = b(f"and i1 {inexact}, {even}")
    same = b(f"icmp sgt {t} {b(f'xor {t} {toward}, {rb}')}, -1")
    step = b(f"add {t} {rb}, {b(f'select i1 {same}, {t} 1, {t} -1')}")
    return b(f"bitcast {t} {b(f'select i1 {fix}, {t} {step}, {t} {rb}')} to {fty}")


def odd_f32(b: Builder, x: str) -> str:
    """The double `x` rounded to odd to float."""
    f = b(f"fptrunc double {x} to float")
    back = b(f"fpext float {f} to double")
    inexact = b(f"fcmp one double {back}, {x}")
    # the step goes towards x: up in magnitude when |back| < |x|
    ab = b.call("double", "llvm.fabs.f64", f"double {back}")
    ax = b.call("double", "llvm.fabs.f64", f"double {x}")
    smaller = b(f"fcmp olt double {ab}, {ax}")
    fb = b(f"bitcast float {f} to i32")
    toward = b(f"select i1 {smaller}, i32 {fb}, i32 {b(f'xor i32 {fb}, -2147483648')}")
    return _to_odd(b, f, "float", 32, inexact, toward)


def round_f32(b: Builder, f: str, fmt: Fmt, mode: str) -> str:
    """The float `f` rounded to half or bfloat with `mode` (rn, rz, rm, rp): the target bits."""
    u = b(f"bitcast float {f} to i32")
    a = b(f"and i32 {u}, 2147483647")
    neg = b(f"icmp slt i32 {u}, 0")
    expf = b(f"lshr i32 {a}, 23")
    normal = b(f"icmp ne i32 {expf}, 0")
    m = b(f"or i32 {b(f'and i32 {a}, 8388607')}, "
          f"{b(f'select i1 {normal}, i32 8388608, i32 0')}")
    et = b(f"add i32 {b.call('i32', 'llvm.umax.i32', f'i32 {expf}', 'i32 1')}, {fmt.bias - 127}")
    below = b.call("i32", "llvm.smax.i32", f"i32 {b(f'sub i32 1, {et}')}", "i32 0")
    sh = b.call("i32", "llvm.umin.i32", f"i32 {b(f'add i32 {below}, {23 - fmt.frac}')}", "i32 25")
    q = b(f"lshr i32 {m}, {sh}")
    one = b(f"shl i32 1, {sh}")
    rem = b(f"and i32 {m}, {b(f'sub i32 {one}, 1')}")
    half = b(f"lshr i32 {one}, 1")
    ebase = b(f"sub i32 {b.call('i32', 'llvm.smax.i32', f'i32 {et}', 'i32 1')}, 1")
    base = b(f"add i32 {b(f'shl i32 {ebase}, {fmt.frac}')}, {q}")
    lost = b(f"icmp ne i32 {rem}, 0")
    if mode == "rn":
        tie = b(f"and i1 {b(f'icmp eq i32 {rem}, {half}')}, {b(f'trunc i32 {q} to i1')}")
        inc = b(f"or i1 {b(f'icmp ugt i32 {rem}, {half}')}, {tie}")
        to_inf = "true"
    elif mode == "rz":
        inc, to_inf = "false", "false"
    else:  # away from zero when the sign is the direction's
        away = neg if mode == "rm" else b(f"xor i1 {neg}, true")
        inc, to_inf = b(f"and i1 {lost}, {away}"), away
    r = b(f"add i32 {base}, {b(f'zext i1 {inc} to i32')}")
    big = b(f"select i1 {to_inf}, i32 {fmt.inf}, i32 {fmt.inf - 1}")
    r = b(f"select i1 {b(f'icmp sge i32 {et}, {fmt.emax}')}, i32 {big}, i32 {r}")
    r = b(f"select i1 {b(f'icmp eq i32 {a}, 2139095040')}, i32 {fmt.inf}, i32 {r}")
    r = b(f"or i32 {r}, {b(f'select i1 {neg}, i32 32768, i32 0')}")
    r = b(f"select i1 {b(f'icmp ugt i32 {a}, 2139095040')}, i32 {fmt.nan}, i32 {r}")
    return b(f"trunc i32 {r} to i16")


def round_double(b: Builder, x: str, fmt: Fmt, mode: str) -> str:
    """The double `x` (exact, or rounded to odd) rounded to `fmt` with `mode`: the target bits."""
    if fmt is F64:
        return b(f"bitcast double {x} to i64")
    if fmt is F32:
        if mode != "rn":
            raise ValueError("only .rn rounding to .f32 is lifted")
        return b(f"bitcast float {b(f'fptrunc double {x} to float')} to i32")
    return round_f32(b, odd_f32(b, x), fmt, mode)


def int_to_double(b: Builder, v: str, bits: int, signed: bool) -> str:
    """An integer as a double: exact up to 32 bits, rounded to odd for 64."""
    conv = "sitofp" if signed else "uitofp"
    if bits <= 32:
        return b(f"{conv} {ity(bits)} {v} to double")
    neg = b(f"icmp slt i64 {v}, 0") if signed else "false"
    m = b(f"select i1 {neg}, i64 {b(f'sub i64 0, {v}')}, i64 {v}")
    width = b(f"sub i64 64, {b.call('i64', 'llvm.ctlz.i64', f'i64 {m}', 'i1 false')}")
    sh = b.call("i64", "llvm.usub.sat.i64", f"i64 {width}", "i64 53")
    one = b(f"shl i64 1, {sh}")
    lost = b(f"and i64 {m}, {b(f'sub i64 {one}, 1')}")
    sticky = b(f"icmp ne i64 {lost}, 0")
    kept = b(f"or i64 {b(f'lshr i64 {m}, {sh}')}, {b(f'zext i1 {sticky} to i64')}")
    e = b(f"add i64 {sh}, 1023")
    scale = b(f"bitcast i64 {b(f'shl i64 {e}, 52')} to double")
    d = b(f"fmul double {b(f'uitofp i64 {kept} to double')}, {scale}")
    return b(f"select i1 {neg}, double {b(f'fneg double {d}')}, double {d}")


def to_int(b: Builder, x: str, irnd: str, bits: int, signed: bool, reg: int,
           from_f64: bool = False) -> str:
    """cvt.{irnd}.{s,u}{bits}.float: round to an integer, clamp to the range; NaN gives 0, or
    1 << (bits - 1) for a 64-bit result or an f64 source. Extended to the register width `reg`."""
    fn = {"rni": "roundeven", "rzi": "trunc", "rmi": "floor", "rpi": "ceil"}[irnd]
    y = b.call("double", f"llvm.{fn}.f64", f"double {x}")
    sat = "fptosi" if signed else "fptoui"
    t = ity(bits)
    r = b.call(t, f"llvm.{sat}.sat.{t}.f64", f"double {y}")
    if bits == 64 or from_f64:
        nan = b(f"fcmp uno double {x}, 0.0")
        r = b(f"select i1 {nan}, {t} {_signed(1 << (bits - 1), bits)}, {t} {r}")
    if reg > bits:
        r = b(f"{'sext' if signed else 'zext'} {t} {r} to {ity(reg)}")
    return r
