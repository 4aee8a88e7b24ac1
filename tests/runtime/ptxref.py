"""Reference semantics for the lifted-PTX tests (tests/runtime/test_ptxlift.py), computed apart
from the code under test: exact rational arithmetic (`fractions.Fraction`) rounded by
`round_exact` (integer arithmetic on the scaled significand), numpy float16 where numpy rounds
correctly, and bfloat16 decoded by bit shifts. Plus a JIT harness that lifts one asm template
in a loop over arrays and runs it (MCJIT) the way the executor does.
"""

from __future__ import annotations

import ctypes
import math
import struct
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from sirius.runtime.cpu import native, ptxlift
from sirius.runtime.cpu.jit import _machine, _target


@dataclass(frozen=True)
class F:
    bits: int
    bias: int
    frac: int
    emax: int

    @property
    def inf(self) -> int:
        return self.emax << self.frac


FMT = {"f16": F(16, 15, 10, 31), "bf16": F(16, 127, 7, 255), "f32": F(32, 127, 23, 255),
       "f64": F(64, 1023, 52, 2047)}
UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64, 8: np.uint8}


# ---- decoding (exact) ----------------------------------------------------------------------------
def to_f64(bits: np.ndarray, ty: str) -> np.ndarray:
    """The values of `ty` bit patterns as float64 (exact for every format but f64 itself)."""
    bits = np.asarray(bits)
    with np.errstate(invalid="ignore"):
        return _to_f64(bits, ty)


def _to_f64(bits: np.ndarray, ty: str) -> np.ndarray:
    if ty == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if ty == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if ty == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return bits.astype(np.uint64).view(np.float64)


def dec(v: int, ty: str) -> float:
    """The value of one bit pattern (a Python float; exact)."""
    if ty == "f16":
        return struct.unpack("<e", (v & 0xFFFF).to_bytes(2, "little"))[0]
    if ty == "bf16":
        return struct.unpack("<f", ((v & 0xFFFF) << 16).to_bytes(4, "little"))[0]
    if ty == "f32":
        return struct.unpack("<f", (v & 0xFFFFFFFF).to_bytes(4, "little"))[0]
    return struct.unpack("<d", v.to_bytes(8, "little"))[0]


def is_nan_bits(bits: int, ty: str) -> bool:
    f = FMT[ty]
    return (bits & ((1 << (f.bits - 1)) - 1)) > f.inf


def round_exact(x: float | Fraction, ty: str, mode: str = "rn", neg_zero: bool = False) -> int:
    """The bits of `x` rounded to `ty` with `mode`; x may be a float (inf, NaN, signed zero) or
    an exact Fraction. NaN gives the canonical NaN (every fraction bit set)."""
    f = FMT[ty]
    sign_bit = 1 << (f.bits - 1)
    if isinstance(x, float) and (fast := _exactly(x, ty)) is not None:
        return fast
    if isinstance(x, float):
        if math.isnan(x):
            return f.inf | ((1 << f.frac) - 1)
        if math.isinf(x):
            return f.inf | (sign_bit if x < 0 else 0)
        if x == 0:
            return sign_bit if math.copysign(1, x) < 0 else 0
        p, q = x.as_integer_ratio()
    else:
        p, q = x.numerator, x.denominator
    if p == 0:
        return sign_bit if neg_zero else 0
    neg = p < 0
    p = -p if neg else p
    # integers only (Fractions made the table tests' references most of their time):
    # e = floor(log2(p / q)), then n + rem = (p / q) / 2^(e - frac), all exact
    e = p.bit_length() - q.bit_length()
    if (q << e if e >= 0 else q) > (p if e >= 0 else p << -e):
        e -= 1
    emin = 1 - f.bias
    e = max(e, emin)
    shift = f.frac - e
    num, den = (p << shift, q) if shift >= 0 else (p, q << -shift)
    n, r = divmod(num, den)
    away = (mode == "rp" and not neg) or (mode == "rm" and neg)
    if mode == "rn":
        n += 2 * r > den or (2 * r == den and n % 2 == 1)
    elif away:
        n += r != 0
    bits = ((e - emin) << f.frac) + n
    if bits >= f.inf:
        bits = f.inf if (mode == "rn" or away) else f.inf - 1
    return bits | (sign_bit if neg else 0)


def _exactly(x: float, ty: str) -> int | None:
    """The bits of a finite nonzero float that `ty` represents exactly (else None)."""
    if not math.isfinite(x) or x == 0:
        return None
    try:
        if ty == "f64":
            return int.from_bytes(struct.pack("<d", x), "little")
        if ty == "f16":
            b = struct.pack("<e", x)
            return int.from_bytes(b, "little") if struct.unpack("<e", b)[0] == x else None
        b = struct.pack("<f", x)
        if struct.unpack("<f", b)[0] != x:
            return None
        v = int.from_bytes(b, "little")
        if ty == "bf16":
            return v >> 16 if v & 0xFFFF == 0 else None
        return v
    except (OverflowError, struct.error):
        return None


def exact(v: float) -> Fraction | float:
    return v if (math.isnan(v) or math.isinf(v) or v == 0) else Fraction(v)


def flush(bits: int, ty: str) -> int:
    f = FMT[ty]
    return bits & (1 << (f.bits - 1)) if (bits & f.inf) == 0 else bits


# ---- inputs --------------------------------------------------------------------------------------
def edges(ty: str) -> list[int]:
    """Edge-value bit patterns: zeros, subnormals, min/max normal, infinities, NaNs, near 1."""
    f = FMT[ty]
    s = 1 << (f.bits - 1)
    one = f.bias << f.frac
    vals = [0, 1, 2, 3, (1 << f.frac) - 1, 1 << f.frac, (1 << f.frac) + 1, f.inf - 1, f.inf - 2,
            f.inf, f.inf | 1, f.inf | (1 << (f.frac - 1)), f.inf | ((1 << f.frac) - 1),
            one, one + 1, one - 1, one + (1 << f.frac), one - (1 << f.frac), one | 3]
    return sorted({v | sg for v in vals for sg in (0, s)})


def random_bits(ty: str, n: int, seed: int) -> np.ndarray:
    """Random values of `ty`: uniform bit patterns and normal-distributed values at few scales."""
    r = np.random.default_rng(seed)
    f = FMT[ty]
    u = r.integers(0, 1 << f.bits, n // 2, dtype=np.uint64)
    vals = r.standard_normal(n - n // 2) * np.exp2(r.integers(-8, 9, n - n // 2))
    v = np.array([round_exact(Fraction(float(x)), ty) for x in vals], dtype=np.uint64)
    return np.concatenate([u, v]).astype(UINT[f.bits])


def pairs(ty: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    e = np.array(edges(ty), dtype=UINT[FMT[ty].bits])
    a, b = np.meshgrid(e, e)
    return (np.concatenate([a.ravel(), random_bits(ty, n, seed)]),
            np.concatenate([b.ravel(), random_bits(ty, n, seed + 1)]))


# ---- the JIT harness -----------------------------------------------------------------------------
_LLTY = {8: "i8", 16: "i16", 32: "i32", 64: "i64"}


def _escape(tpl: str) -> str:
    return "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):02X}" for c in tpl)


@dataclass
class Case:
    """One asm template applied elementwise: `run(*arrays)` gives the output array."""
    template: str
    constraints: str
    out_bits: int
    in_bits: tuple[int, ...]

    def ir(self) -> str:
        ins = [f"ptr %p{i}" for i in range(len(self.in_bits))]
        lines = [f"define void @run({', '.join(ins + ['ptr %out', 'i64 %n'])}) {{",
                 "entry:", "  br label %loop", "loop:",
                 "  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]"]
        args = []
        for k, bits in enumerate(self.in_bits):
            t = _LLTY[bits]
            lines += [f"  %g{k} = getelementptr {t}, ptr %p{k}, i64 %i",
                      f"  %x{k} = load {t}, ptr %g{k}"]
            args.append(f"{t} %x{k}")
        t = _LLTY[self.out_bits]
        lines += [f'  %r = call {t} asm "{_escape(self.template)}", "{self.constraints}"'
                  f"({', '.join(args)})",
                  f"  %go = getelementptr {t}, ptr %out, i64 %i",
                  f"  store {t} %r, ptr %go", "  %i1 = add i64 %i, 1",
                  "  %d = icmp eq i64 %i1, %n", "  br i1 %d, label %exit, label %loop",
                  "exit:", "  ret void", "}"]
        return "\n".join(lines) + "\n"

    def run(self, *arrays: np.ndarray) -> np.ndarray:
        lifted = ptxlift.lift(self.ir())
        assert lifted.lifted == 1, "the template was not lifted"
        llvm_, _, _ = _target()
        lib = native.library()
        mod = llvm_.parse_assembly(lifted.text)
        mod.verify()
        for fn in mod.functions:
            if fn.is_declaration and fn.name.startswith("__nv_"):
                llvm_.add_symbol(fn.name, ctypes.cast(getattr(lib, fn.name), ctypes.c_void_p).value)
        ee = llvm_.create_mcjit_compiler(mod, _machine())
        ee.finalize_object()
        n = len(arrays[0])
        ins = [np.ascontiguousarray(a, dtype=UINT[b]) for a, b in zip(arrays, self.in_bits,
                                                                      strict=True)]
        out = np.zeros(n, dtype=UINT[self.out_bits])
        cf = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (len(ins) + 1), ctypes.c_int64)(
            ee.get_function_address("run"))
        cf(*[a.ctypes.data for a in ins], out.ctypes.data, n)
        del ee
        return out


def letter(bits: int) -> str:
    return {16: "h", 32: "r", 64: "l"}[bits]


def elementwise(opcode: str, out_bits: int, in_bits: tuple[int, ...]) -> Case:
    """`opcode $0, $1, ...` as a Case."""
    ops = ", ".join(f"${i}" for i in range(len(in_bits) + 1))
    cons = ",".join([f"={letter(out_bits)}", *[letter(b) for b in in_bits]])
    return Case(f"{{{opcode} {ops};}}", cons, out_bits, in_bits)


def predicate(setp: str, bits: int, n_in: int = 2) -> Case:
    """A setp whose predicate is returned as 0/1 through selp (as cuda_fp16.hpp does)."""
    ops = ", ".join(f"${i + 1}" for i in range(n_in))
    tpl = f"{{ .reg .pred p;\n  {setp} p, {ops};\n  selp.u16 $0, 1, 0, p;}}"
    return Case(tpl, ",".join(["=h", *[letter(bits)] * n_in]), 16, (bits,) * n_in)
