"""Floating-point operations of device IR, per precision, for the executor's FLOP counters.

A FLOP site is an `fadd`/`fsub`/`fmul`/`fdiv`/`frem`/`fneg` (one per vector lane), a call of
`llvm.fma.*`/`llvm.fmuladd.*` (two per lane) or of a libdevice math function `__nv_*` (one per
lane: `tanhf` is one FLOP here, however many instructions it takes). Comparisons, conversions,
`minnum`/`maxnum` and inline asm are not FLOPs. With `count_flops` the executor's rewrite adds,
at the start of each basic block, the block's FLOPs of each precision to the running thread's
counters (next to its instruction counter), so one run gives a launch's exact FLOPs per
precision (`LaunchStats.flops`); sirius tune's cost model reads them (sirius/tune/counts.py).
"""

from __future__ import annotations

import re

PRECISIONS = ("f16", "f32", "f64")  # the order of the executor's counters
_OF_TYPE = {"half": "f16", "bfloat": "f16", "float": "f32", "double": "f64"}
_FLAGS = r"(?:(?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc)\s+)*"
_TYPE = r"(?:<(\d+) x (half|bfloat|float|double)>|(half|bfloat|float|double))"
_ARITH = re.compile(rf"^\s*%[-\w.$\"]+ = (?:fadd|fsub|fmul|fdiv|frem|fneg)\s+{_FLAGS}{_TYPE}\s")
_CALL = re.compile(rf"\bcall\b[^@]*?{_TYPE} @([\w.$]+)\(")


def flop_site(line: str) -> tuple[str, int] | None:
    """(precision, FLOPs) of one IR instruction's text, or None."""
    m = _ARITH.match(line)
    weight = 1
    if m is None:
        m = _CALL.search(line)
        if m is None:
            return None
        callee = m.group(4)
        if re.match(r"llvm\.(fma|fmuladd)\.", callee):
            weight = 2
        elif not callee.startswith("__nv_"):
            return None
    lanes = int(m.group(1)) if m.group(1) else 1
    return _OF_TYPE[m.group(2) or m.group(3)], weight * lanes


def block_flops(texts) -> tuple[int, int, int]:
    """The FLOPs per precision (PRECISIONS order) of instructions with these texts."""
    out = [0, 0, 0]
    for t in texts:
        s = flop_site(t)
        if s is not None:
            out[PRECISIONS.index(s[0])] += s[1]
    return out[0], out[1], out[2]
