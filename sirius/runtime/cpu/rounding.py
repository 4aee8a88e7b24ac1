"""How the executor rounds: every floating-point operation on its own (no FMA contraction, no
reassociation), whatever the shape of the code around it."""

from __future__ import annotations

import re

_FP_FLAGS = re.compile(r"(= (?:fadd|fsub|fmul|fdiv|frem|fneg|call|phi|select)"
                       r"((?: (?:fast|contract|reassoc|nnan|ninf|nsz|arcp|afn))+) )")
_LOOSE = {"fast", "contract", "reassoc"}


def uncontracted(text: str) -> str:
    """The module with no `contract`, `reassoc` or `fast` flag: the host backend would fuse a
    multiply and an add into an FMA (or reorder a sum) wherever the shape of the code lets it,
    so the same kernel would round differently instrumented or not, fused or not (an LSTM
    amplified one such ulp to a different output). Every operation rounds on its own; the
    `llvm.fma`/`llvm.fmuladd` a kernel asks for explicitly stay."""
    def keep(m: re.Match) -> str:
        flags = [f for f in m.group(2).split() if f not in _LOOSE]
        if "fast" in m.group(2):
            flags += [f for f in ("nnan", "ninf", "nsz", "arcp", "afn") if f not in flags]
        head = m.group(1)[: m.start(2) - m.start(1)]
        return head + "".join(f" {f}" for f in flags) + " "
    return _FP_FLAGS.sub(keep, text)
