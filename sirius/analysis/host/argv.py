"""The program's command line in the host model (`--args "A B C"`, docs/host-model.md#argv).

With arguments given, the entry function receives argc and an argv array whose strings are host
memory the model knows byte by byte, so the program is specialised to them: `atoi(argv[1])`,
`strtol`, `strtoul`, `atof`, `strtod`, `strtof` (and glibc's `__isoc23_` forms) evaluate
to constants, branches on argc are decided, and loads of single characters read the bytes.
Parsing follows C: leading white space, a sign, the longest valid prefix; `strtol`'s base 0
reads 0x and 0 prefixes; an `endptr` that is host memory receives the end of the parsed prefix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sirius.analysis.host.floats import round_to
from sirius.analysis.host.values import AV, Flt, HostPtr, Int, Memory, Null, Region, const

PROGRAM_NAME = "program"  # argv[0]

_INTS = {"atoi": (32, True), "atol": (64, True), "atoll": (64, True), "strtol": (64, True),
         "strtoll": (64, True), "strtoq": (64, True), "strtoul": (64, False),
         "strtoull": (64, False), "strtouq": (64, False)}
_FLOATS = {"atof": "double", "strtod": "double", "strtof": "float"}


def program_arguments(mem: Memory, args: Sequence[str]) -> tuple[AV, AV]:
    """(argc, argv) for the entry function: argv[0] is PROGRAM_NAME, argv[argc] is NULL."""
    words = [PROGRAM_NAME, *args]
    table = Region("argv", "global", f"[{len(words) + 1} x ptr]")
    for i, w in enumerate(words):
        r = Region(f"argv[{i}]", "global", f"[{len(w.encode()) + 1} x i8]")
        for k, byte in enumerate(w.encode() + b"\0"):
            mem.store(r, k, 1, const(byte, 8))
        mem.store(table, 8 * i, 8, HostPtr(r))
    mem.store(table, 8 * len(words), 8, Null())
    return const(len(words), 32), HostPtr(table)


def read_string(mem: Memory, p: AV) -> str | None:
    """The NUL-terminated string at `p` when every byte is known."""
    if not (isinstance(p, HostPtr) and p.offset.is_const):
        return None
    out = bytearray()
    off = p.offset.const
    for _ in range(1 << 16):
        b = mem.load(p.region, off, 1, "")
        if not (isinstance(b, Int) and b.e.is_const):
            return None
        if b.e.const & 0xFF == 0:
            return out.decode(errors="replace")
        out.append(b.e.const & 0xFF)
        off += 1
    return None


_WS = " \t\n\v\f\r"


def parse_int(s: str, base: int) -> tuple[int, int]:
    """C strtol: (value, characters consumed; 0 when nothing was parsed)."""
    i = len(s) - len(s.lstrip(_WS))
    sign = 1
    if i < len(s) and s[i] in "+-":
        sign = -1 if s[i] == "-" else 1
        i += 1
    if base in (0, 16) and s[i:i + 2].lower() == "0x" and i + 2 < len(s) and \
            s[i + 2].lower() in "0123456789abcdef":
        i, base = i + 2, 16
    elif base == 0:
        base = 8 if s[i:i + 1] == "0" else 10
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    j = i
    while j < len(s) and s[j].lower() in digits:
        j += 1
    if j == i:
        return 0, 0
    return sign * int(s[i:j], base), j


_FLOAT = re.compile(r"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
                    r"(?:[pP][+-]?\d+)?|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|"
                    r"inf(?:inity)?|nan)", re.IGNORECASE)


def parse_float(s: str) -> tuple[float, int]:
    i = len(s) - len(s.lstrip(_WS))
    m = _FLOAT.match(s, i)
    if m is None:
        return 0.0, 0
    text = m.group(0)
    if "x" in text.lower():
        sign = -1.0 if text.startswith("-") else 1.0
        v = sign * float.fromhex(text.lstrip("+-"))
    else:
        v = float(text)
    return v, m.end()


def string_call(name: str, args: list[AV], mem: Memory) -> AV | None:
    """A string-to-number call on a string the model knows; None when it is not one (or the
    string is not known: the call is then an ordinary unknown result)."""
    base_name = name.removeprefix("__isoc23_")
    if base_name not in _INTS and base_name not in _FLOATS or not args:
        return None
    s = read_string(mem, args[0])
    if s is None:
        return None
    if base_name in _INTS:
        bits, signed = _INTS[base_name]
        base = 10
        if base_name.startswith("strto"):
            if len(args) < 3 or not (isinstance(args[2], Int) and args[2].e.is_const):
                return None
            base = args[2].e.const
            if base != 0 and not 2 <= base <= 36:
                return None
        v, used = parse_int(s, base)
        if base_name.startswith("strto"):
            lo, hi = (-(1 << 63), (1 << 63) - 1) if signed else (-(1 << 64) + 1, (1 << 64) - 1)
            v = min(max(v, lo), hi)  # strtol saturates (strtoul negates modulo 2^64)
        result: AV = const(v, bits)
    else:
        f, used = parse_float(s)
        result = Flt(round_to(f, _FLOATS[base_name]))
    if base_name.startswith("strto") and len(args) > 1:
        end = args[1]
        if isinstance(end, HostPtr) and end.offset.is_const:
            p = args[0]
            assert isinstance(p, HostPtr)
            mem.store(end.region, end.offset.const, 8, HostPtr(p.region, p.offset + used))
        elif not isinstance(end, Null):
            return None
    return result
