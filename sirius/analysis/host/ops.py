"""Integer, pointer and comparison semantics of LLVM instructions over abstract host values."""

from __future__ import annotations

import re

import islpy as isl

from sirius.analysis.expr import Expr
from sirius.analysis.host import floats
from sirius.analysis.host.values import (
    AV,
    DevPtr,
    HostPtr,
    Int,
    Null,
    Packed,
    Unknown,
    const,
    int_bits,
    offset_addr,
)

Ranges = dict[str, tuple[int, int]]


def _nonneg(e: Expr, ranges: Ranges) -> bool:
    """e >= 0 over the box of the host loop `ranges`: by interval arithmetic, else (it forgets
    that two terms move together, e.g. `1000 - t - max(0, 744 - t)`) by isl, exactly."""
    b = e.bounds(ranges)
    if b is not None:
        if b[0] >= 0:
            return True
        if b[1] < 0:
            return False
    names = sorted(e.variables())
    if any(v not in ranges for v in names):
        return False
    box = " and ".join(f"{ranges[v][0]} <= {v} <= {ranges[v][1]}" for v in names) or "true"
    try:
        neg = isl.Set(f"{{ [{', '.join(names)}] : {box} and {e} < 0 }}")
    except isl.Error:
        return False
    return bool(neg.is_empty())


def binary(op: str, a: AV, b: AV, ty: str, ranges: Ranges, flags: str = "") -> AV:
    """`a op b` for an integer binary instruction of type `ty`."""
    bits = int_bits(ty)
    if isinstance(a, Packed) or isinstance(b, Packed):
        got = _packed_binary(op, a, b)
        if isinstance(got, Unknown) and op in ("add", "sub", "mul") and bits == 64:
            # the pair as the integer it is, x + 2^32 y (x zero-extended): exact 64-bit
            # arithmetic on it, split again where the dim3 is read (unpack_xy proves the split)
            wide = [Int(v.lo.e + v.hi.e.scale(1 << 32), 64)
                    if isinstance(v, Packed) and isinstance(v.lo, Int) and isinstance(v.hi, Int)
                    else v for v in (a, b)]
            if not any(isinstance(v, Packed) for v in wide):
                return binary(op, wide[0], wide[1], ty, ranges, flags)
        return got
    # Pointer arithmetic through ptrtoint/inttoptr: a device or host pointer plus an integer.
    if op in ("add", "sub") and isinstance(b, Int) and isinstance(a, DevPtr | HostPtr):
        delta = b.e if op == "add" else -b.e
        return _offset(a, delta)
    if op == "add" and isinstance(a, Int) and isinstance(b, DevPtr | HostPtr):
        return _offset(b, a.e)
    if not (isinstance(a, Int) and isinstance(b, Int)):
        return a if isinstance(a, Unknown) else b if isinstance(b, Unknown) else Unknown(
            f"integer '{op}' on values that are not integers")
    x, y = a.e, b.e
    if x.is_const and y.is_const:
        return _const_binary(op, x.const, y.const, bits)
    if op == "add":
        return Int(x + y, bits)
    if op == "sub":
        return Int(x - y, bits)
    if op == "mul":
        m = x.mul(y)
        return Int(m, bits) if m is not None else Unknown("product of two loop-dependent values")
    if op == "shl" and y.is_const:
        return Int(x.scale(1 << y.const), bits)
    if op == "or" and "disjoint" in flags:
        return Int(x + y, bits)
    if y.is_const and y.const > 0:
        d = y.const
        if op in ("sdiv", "udiv") and _nonneg(x, ranges):
            return Int(x.floordiv(d), bits)
        if op in ("srem", "urem") and _nonneg(x, ranges):
            return Int(x.mod(d), bits)
        if op in ("lshr", "ashr") and _nonneg(x, ranges):
            return Int(x.floordiv(1 << d), bits)
        if op == "and" and _nonneg(x, ranges):
            low = (d & -d).bit_length() - 1  # mask = 2^low * (2^width - 1): contiguous bits
            width = (d >> low).bit_length()
            if (d >> low) == (1 << width) - 1:
                return Int(x.floordiv(1 << low).mod(1 << width).scale(1 << low), bits)
        # x ^ (2^k - 1) for 0 <= x <= 2^k - 1 flips every bit of x: 2^k - 1 - x (what LLVM
        # makes of `(r + 1) % 2` from `r % 2`)
        if op == "xor" and d & (d + 1) == 0 and _nonneg(x, ranges) and _nonneg(d - x, ranges):
            return Int(d - x, bits)
    return Unknown(f"'{op}' of a loop-dependent value is not quasi-affine")


_MINMAX = re.compile(r"llvm\.([su])(min|max)\.i(\d+)")


def funnel_call(name: str, args: list[AV], ranges: Ranges) -> AV | None:
    """`llvm.fshl/fshr.i64(a, b, 32)` (a funnel shift by half: (a << 32) | (b >> 32), which
    LLVM makes of a dim3 whose halves are another's swapped) as the packed pair (the high half
    of b, the low half of a); None: not one of them."""
    if name not in ("llvm.fshl.i64", "llvm.fshr.i64") or len(args) != 3:
        return None
    if args[2] != const(32, 64):
        return Unknown(f"{name}() by other than 32 bits")
    a_lo, _ = unpack_xy(args[0], ranges)
    _, b_hi = unpack_xy(args[1], ranges)
    if not (isinstance(a_lo, Int) and isinstance(b_hi, Int)):
        return a_lo if isinstance(a_lo, Unknown) else b_hi
    return Packed(b_hi, a_lo)


def minmax_call(name: str, args: list[AV], ranges: Ranges) -> AV | None:
    """`llvm.smin/smax/umin/umax.iN` of host integers (what clang makes of `MIN(a, b)`); None:
    not one of them. The unsigned forms are modelled only where both values are non-negative
    over the host loops (then they agree with the signed ones)."""
    m = _MINMAX.fullmatch(name)
    if m is None or len(args) != 2:
        return None
    a, b = args
    if not (isinstance(a, Int) and isinstance(b, Int)):
        return a if isinstance(a, Unknown) else b if isinstance(b, Unknown) else Unknown(
            f"{name}() of values that are not integers")
    return signed_minmax(m.group(2), a, b, int(m.group(3)), m.group(1) == "u", ranges)


def signed_minmax(kind: str, a: Int, b: Int, bits: int, unsigned: bool, ranges: Ranges) -> AV:
    """min/max of two host integers as an Expr (both in range of `bits`-wide integers)."""
    if a.e.is_const and b.e.is_const:
        x, y = a.e.const, b.e.const
        if unsigned:
            x, y = x % (1 << bits), y % (1 << bits)
        return const(min(x, y) if kind == "min" else max(x, y), bits)
    if unsigned and not (_nonneg(a.e, ranges) and _nonneg(b.e, ranges)):
        return Unknown(f"unsigned {kind} of ({a.e}) and ({b.e}), which may be negative")
    return Int(a.e.minmax(kind, b.e), bits)


def _offset(p: DevPtr | HostPtr, delta: Expr) -> AV:
    if isinstance(p, DevPtr):
        return DevPtr(offset_addr(p.addr, delta))
    return HostPtr(p.region, p.offset + delta)


def _const_binary(op: str, x: int, y: int, bits: int) -> AV:
    mask = (1 << bits) - 1
    ux, uy = x & mask, y & mask
    try:
        r = {
            "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
            "and": lambda: ux & uy, "or": lambda: ux | uy, "xor": lambda: ux ^ uy,
            "shl": lambda: ux << uy, "lshr": lambda: ux >> uy, "ashr": lambda: x >> uy,
            "udiv": lambda: ux // uy, "urem": lambda: ux % uy,
            "sdiv": lambda: abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1),
            "srem": lambda: x - y * (abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)),
        }[op]()
    except ZeroDivisionError:
        return Unknown("division by zero in host code")
    except KeyError:
        return Unknown(f"unsupported integer operation '{op}'")
    return const(r, bits)


def _packed_binary(op: str, a: AV, b: AV) -> AV:
    if op == "or":
        for p, q in ((a, b), (b, a)):
            if isinstance(p, Packed) and p.lo == const(0, 32) and isinstance(q, Int):
                return Packed(q, p.hi)
    if op == "lshr" and isinstance(a, Packed) and b == const(32, 64):
        return a.hi
    if op == "and" and isinstance(a, Packed) and b == const(0xFFFFFFFF, 64):
        return a.lo
    return Unknown("arithmetic on a packed dim3 value")


def shift_to_packed(a: AV, b: AV, bits: int) -> AV | None:
    """`zext(y) << 32` in i64: the high half of a dim3's (x, y) pair."""
    if bits == 64 and b == const(32, 64) and isinstance(a, Int) and not a.e.is_const:
        return Packed(const(0, 32), a)
    return None


def _split32(c: int) -> tuple[int, int]:
    """c as lo + 2^32 hi with lo in [-2^31, 2^31)."""
    lo = c % (1 << 32)
    if lo >= 1 << 31:
        lo -= 1 << 32
    return lo, (c - lo) >> 32


def unpack_xy(av: AV, ranges: Ranges | None = None) -> tuple[AV, AV]:
    """The (x, y) halves of a dim3's packed 64-bit {x, y}: x = the low 32 bits, y = the high
    ones. A host-computed value is x + 2^32 y as an expression (LLVM folds `zext(x) |
    zext(y) << 32` into sums and products: `dim3 g(n, n)` becomes (2^32 + 1) n, `g(3 - t,
    1 + t)` (2^32 + 3) + (2^32 - 1) t): each coefficient is split into a low part in
    [-2^31, 2^31) and a high part, and the split is the real one only where the low sum lies
    in [0, 2^32) for every value of the host loop variables (`ranges`), which is proved;
    otherwise the halves are unknown, with that reason."""
    if isinstance(av, Int) and av.e.is_const:
        c = av.e.const & 0xFFFFFFFFFFFFFFFF
        return const(c & 0xFFFFFFFF, 32), const(c >> 32, 32)
    if isinstance(av, Packed):
        return av.lo, av.hi
    if isinstance(av, Int):
        parts = {a: _split32(c) for a, c in av.e.terms}
        c_lo, c_hi = _split32(av.e.const)
        lo = Expr._make(c_lo, {a: x for a, (x, _) in parts.items() if x})
        hi = Expr._make(c_hi, {a: y for a, (_, y) in parts.items() if y})
        if lo.is_const and 0 <= lo.const < 1 << 32:
            return Int(lo, 32), Int(hi, 32)
        if ranges is not None and _nonneg(lo, ranges) and \
                _nonneg(0xFFFFFFFF - lo, ranges):
            return Int(lo, 32), Int(hi, 32)
        u = Unknown(f"a dim3 built from host values whose x half ({lo}) sirius cannot prove "
                    "to lie in 0 .. 2^32 - 1")
        return u, u
    u = av if isinstance(av, Unknown) else Unknown("grid or block size is not a known value")
    return u, u


_SIGNED = {"slt": "<", "sle": "<=", "sgt": ">", "sge": ">=", "eq": "==", "ne": "!="}
_UNSIGNED = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


def compare_ints(pred: str, x: int, y: int, bits: int) -> bool:
    """`x pred y` for an icmp predicate (slt .. uge, eq, ne) on `bits`-wide integers."""
    if pred not in _SIGNED and pred not in _UNSIGNED:
        # an instruction whose text was not read as an icmp (irview pairs texts with
        # instructions): a bug, but one that names what it saw
        raise ValueError(f"not an integer comparison predicate: {pred!r}")
    if pred in _UNSIGNED:
        mask = (1 << bits) - 1
        x, y = x & mask, y & mask
        pred = "s" + pred[1:]
    return {"slt": x < y, "sle": x <= y, "sgt": x > y, "sge": x >= y,
            "eq": x == y, "ne": x != y}[pred]


def icmp(pred: str, a: AV, b: AV, ty: str, ranges: Ranges) -> AV:
    bits = int_bits(ty) if ty.startswith("i") else 64
    if isinstance(a, Int) and isinstance(b, Int):
        d = (a.e - b.e)
        if d.is_const:
            if a.e.is_const:
                return const(int(compare_ints(pred, a.e.const, b.e.const, bits)), 1)
            return const(int(compare_ints(pred if pred in _SIGNED else "s" + pred[1:],
                                          d.const, 0, 64)), 1)
        bd = d.bounds(ranges)
        if bd is not None and (pred in _SIGNED or (_nonneg(a.e, ranges) and _nonneg(b.e, ranges))):
            p = pred if pred in _SIGNED else "s" + pred[1:]
            lo_t, hi_t = compare_ints(p, bd[0], 0, 64), compare_ints(p, bd[1], 0, 64)
            if p in ("eq", "ne"):
                if bd[0] == bd[1] == 0 or not (bd[0] <= 0 <= bd[1]):
                    return const(int(compare_ints(p, bd[0], 0, 64)), 1)
            elif lo_t == hi_t:
                return const(int(lo_t), 1)
        return Unknown(f"loop variables ({a.e} {pred} {b.e})")
    if pred in ("eq", "ne"):
        same = _pointer_equal(a, b)
        if same is not None:
            return const(int(same if pred == "eq" else not same), 1)
    return a if isinstance(a, Unknown) else b if isinstance(b, Unknown) else Unknown(
        "comparison of host values sirius does not track")


def _pointer_equal(a: AV, b: AV) -> bool | None:
    if isinstance(a, Null) and isinstance(b, Null):
        return True
    if isinstance(a, Null | DevPtr | HostPtr) and isinstance(b, Null | DevPtr | HostPtr):
        if isinstance(a, Null) or isinstance(b, Null):
            return False  # a pointer from cudaMalloc or to host memory is never null here
    return None


def cast(op: str, a: AV, src_ty: str, dst_ty: str, ranges: Ranges | None = None) -> AV:
    if op in ("zext", "sext", "trunc"):
        if isinstance(a, Packed) and op == "trunc":
            return a.lo
        if not isinstance(a, Int):
            return a
        bits = int_bits(dst_ty)
        if a.e.is_const:
            v = a.e.const
            if op == "zext":
                v &= (1 << int_bits(src_ty)) - 1
            return const(v, bits)
        return Int(a.e, bits)
    if op in ("ptrtoint", "inttoptr", "bitcast", "addrspacecast", "freeze"):
        return a
    if op in ("sitofp", "uitofp"):
        return floats.to_float(op, a, src_ty, dst_ty, ranges or {})
    if op in ("fptrunc", "fpext"):
        return floats.resize(op, a, dst_ty, ranges or {})
    if op in ("fptosi", "fptoui"):
        return floats.from_float(op, a, dst_ty, ranges or {})
    return a if isinstance(a, Unknown) else Unknown(f"'{op}' of a value sirius does not track")


def truth(av: AV) -> bool | None:
    if isinstance(av, Int) and av.e.is_const:
        return av.e.const != 0
    return None

