"""The pass manager: `run_pipeline(ir_text, passes, ctx)` runs passes on a module in order.

    from sirius.postopt import PassContext, parse_pipeline, run_pipeline
    r = run_pipeline(text, parse_pipeline("llvm-opt{level=3}"), PassContext(arch="sm_90"))
    r.text          # the module after the last pass, verified
    r.steps         # per pass: its pipeline text, seconds, whether the text changed

The input is parsed and verified first (an IRError names the line), and the module is verified
by LLVM's verifier after every pass, whatever the pass returned: text (parsed first) or a
ModuleRef it changed in place. `verify_each` adds a check that the text printed after every
pass parses and verifies again in a fresh LLVM context (what the backend and `sirius opt -o`
read is that text, not the in-memory module). `print_after` names passes (or `all`) whose
output is written to `dump` (stderr by default).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TextIO

import llvmlite.binding as llvm

from sirius.postopt.base import (
    HostRewrite,
    ModulePass,
    PassContext,
    PassError,
    PassInput,
    parse_ir,
    verify_ir,
)

if TYPE_CHECKING:
    from sirius.analysis.host.model import HostProgram

__all__ = ["PassStep", "PipelineResult", "run_pipeline"]

_FACTS = {"host_program": "the fused host program", "uar": "the program's UAR"}


@dataclass(frozen=True, slots=True)
class PassStep:
    """One pass run: the pass as a pipeline string, its time, the verification's time,
    whether the module's text differs from the text it was given, and the pass's notes (what it
    did, from a HostRewrite)."""

    pass_text: str
    seconds: float
    verify_seconds: float
    changed: bool
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "pass": self.pass_text, "seconds": round(self.seconds, 4),
            "verify_seconds": round(self.verify_seconds, 4), "changed": self.changed}
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """The module after the last pass, each pass's step, and the host program as the passes
    left it (the context's own when no pass rewrote it; None without one)."""

    text: str
    steps: tuple[PassStep, ...]
    host_program: HostProgram | None = None


def run_pipeline(ir_text: str, passes: Sequence[ModulePass], ctx: PassContext | None = None,
                 *, parsed: llvm.ModuleRef | None = None, verify_each: bool = False,
                 print_after: Collection[str] = (), dump: TextIO | None = None
                 ) -> PipelineResult:
    """`ir_text` after `passes`. `parsed`: the caller's ModuleRef of `ir_text`, already
    verified, handed over to the first pass instead of a second parse."""
    ctx = ctx or PassContext()
    _check_requirements(passes, ctx)
    _check_print_after(passes, print_after)
    if parsed is None:
        parsed = parse_ir(ir_text, "the input module", ctx.source)
    module = PassInput(ir_text, parsed)
    steps = []
    for p in passes:
        t0 = time.perf_counter()
        out = p.run(module, ctx)
        t1 = time.perf_counter()
        what = f"the module after {p}"
        notes: tuple[str, ...] = ()
        if isinstance(out, HostRewrite):
            ctx = replace(ctx, host_program=out.host_program)
            notes = out.notes
            out = out.module
        if isinstance(out, llvm.ModuleRef):
            verify_ir(out, what, ctx.source)
            text, ref = str(out), out
        elif isinstance(out, str) and out == module.text and module.untouched() is not None:
            # unchanged, and the pass never took the parsed module: it is still this text's
            text, ref = out, module.untouched()
        elif isinstance(out, str):
            text, ref = out, parse_ir(out, what, ctx.source)
        else:
            raise TypeError(f"pass {p.name} returned {type(out).__name__}, not IR text or a "
                            "ModuleRef")
        if verify_each and isinstance(out, llvm.ModuleRef):
            parse_ir(text, f"{what}, printed and parsed again,", ctx.source)
        steps.append(PassStep(str(p), t1 - t0, time.perf_counter() - t1, text != module.text,
                              notes))
        if p.name in print_after or "all" in print_after:
            print(f"; *** IR Dump After {p} ({t1 - t0:.3f} s) ***\n{text.rstrip()}\n",
                  file=dump or sys.stderr)
        module = PassInput(text, ref)
    return PipelineResult(module.text, tuple(steps), ctx.host_program)


def _check_requirements(passes: Sequence[ModulePass], ctx: PassContext) -> None:
    for p in passes:
        for fact in p.requires:
            if getattr(ctx, fact, None) is None:
                raise PassError(f"pass {p.name} needs {_FACTS.get(fact, fact)}, which this "
                                "pipeline does not have: it runs inside `sirius fuse`, not on "
                                "a bare .ll file")


def _check_print_after(passes: Sequence[ModulePass], names: Collection[str]) -> None:
    have = {p.name for p in passes}
    for n in names:
        if n != "all" and n not in have:
            raise PassError(f"print after {n}: the pipeline has no pass {n}; it has "
                            f"{', '.join(p.name for p in passes) or 'no passes'} (or say all)")
