"""What every post-fusion pass is and receives: `ModulePass`, `PassInput`, `PassContext`, and the
errors of the pass framework (docs/passes.md).

A pass is a frozen dataclass whose fields are its options:

    @dataclass(frozen=True, slots=True)
    class LlvmOpt(ModulePass):
        name: ClassVar[str] = "llvm-opt"
        level: Literal[0, 1, 2, 3] = 3

        def run(self, module: PassInput, ctx: PassContext) -> str | llvm.ModuleRef:
            ...

`run` returns the new module as IR text (a pass that rewrites text) or as the `ModuleRef` it got
from `module.parse()` and changed in place (a pass that runs LLVM's own passes). Either way the
pass manager (`sirius.postopt.manager`) verifies it before the next pass sees it. A pass that
only reads the parsed module (prints or views it) takes it with `module.peek()`: when such a
pass returns the text unchanged, the next pass gets the same parsed module, not a new parse.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar

import llvmlite.binding as llvm

from sirius.diagnostics import Location, SiriusError
from sirius.frontend import llvmctx

if TYPE_CHECKING:
    from sirius.analysis.host.model import HostProgram
    from sirius.analysis.uar.build import UAR

__all__ = ["HostRewrite", "IRError", "ModulePass", "PassContext", "PassError", "PassInput",
           "parse_ir", "require_device", "spell", "verify_ir"]


class PassError(SiriusError):
    """A pass cannot run: a bad option, a missing fact, or a module it refuses."""


_TRIPLE = re.compile(r'^target triple = "([^"]*)"', re.M)


def require_device(text: str, who: str, source: str, does: str = "") -> None:
    """PassError (naming pass `who` and module `source`) unless `text` is a device module: its
    `target triple` is NVPTX, or it names none. `does`: what the pass does, for the message."""
    m = _TRIPLE.search(text)
    if m and not m.group(1).startswith("nvptx"):
        raise PassError(f"{who}: {source} targets {m.group(1)}; this pass {does}takes only "
                        'device modules (target triple = "nvptx64-nvidia-cuda")')


class IRError(PassError):
    """A module that does not parse or verify; `snippet` is the offending line (with a caret
    under the column when LLVM gives one)."""

    def __init__(self, message: str, loc: Location | None = None, snippet: str = ""):
        super().__init__(message, loc)
        self.snippet = snippet

    def render(self) -> str:
        head = f"{self.loc}: " if self.loc else ""
        out = [f"{head}{self.kind}: {self.message}"]
        out += [f"    {line}" for line in self.snippet.splitlines()]
        return "\n".join(out)


@dataclass(frozen=True, slots=True)
class PassContext:
    """What a pass may know besides the module. `arch` is the GPU architecture the module is
    built for; `host_program` (the fused HostProgram) and `uar` (the original program's UAR)
    are there when the pipeline runs inside `sirius fuse`, absent under `sirius opt` on a bare
    `.ll` file. `source` names the module in diagnostics (a file name, or `<fused module>`)."""

    arch: str = "sm_80"
    host_program: HostProgram | None = None
    uar: UAR | None = None
    source: str = "<module>"

    @staticmethod
    def arch_of(text: str, default: str = "sm_80") -> str:
        """The architecture a module's functions are compiled for (`"target-cpu"="sm_NN"`)."""
        m = re.search(r'"target-cpu"="(sm_\d+[af]?)"', text)
        return m.group(1) if m else default


@dataclass(frozen=True, slots=True)
class HostRewrite:
    """What a pass returns when it changes the host program as well as the module (a kernel
    specialised per launch: the launches then name the clones). The pass manager hands
    `host_program` to the passes after it (`ctx.host_program`) and returns it with the module
    (`PipelineResult.host_program`). `notes`: what the pass did, one line each, for the report
    (`PassStep.notes`: plan.json and report.md show them)."""

    module: str | llvm.ModuleRef
    host_program: HostProgram
    notes: tuple[str, ...] = ()


class PassInput:
    """The module a pass runs on: `text`, and its parsed form. `parse()` hands the pass a
    `ModuleRef` it owns and may change: the one the pass manager already parsed and verified
    the first time (no second parse: LLVM renames named struct types each time one module's
    text is parsed again in the same context), a fresh parse after that."""

    __slots__ = ("_ref", "text")

    def __init__(self, text: str, ref: llvm.ModuleRef | None = None):
        self.text = text
        self._ref = ref

    def parse(self) -> llvm.ModuleRef:
        ref, self._ref = self._ref, None
        return ref if ref is not None else parse_ir(self.text, "the module")

    def peek(self) -> llvm.ModuleRef:
        """The parsed module, to read and never change (printing it, viewing it): it stays
        this input's, for the next pass when this one changes nothing."""
        if self._ref is None:
            self._ref = parse_ir(self.text, "the module")
        return self._ref

    def untouched(self) -> llvm.ModuleRef | None:
        """The parsed module, if no pass has taken it with `parse()` (then it is still the
        text's: the pass manager hands it to the next pass when this one changed nothing)."""
        return self._ref


class ModulePass(ABC):
    """Base of every post-fusion pass. Subclasses are `@dataclass(frozen=True, slots=True)`
    with a kebab-case `name`, their options as typed fields with defaults, and `run`.

    `requires` names the PassContext facts the pass cannot work without (`"host_program"`,
    `"uar"`); the pass manager refuses to run it, with a message, when one is absent."""

    __slots__ = ()
    name: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def run(self, module: PassInput, ctx: PassContext
            ) -> str | llvm.ModuleRef | HostRewrite:
        """The module after the pass: IR text, or the ModuleRef from `module.parse()`; wrapped
        in a HostRewrite with the new host program when the pass changes that too."""

    def options(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def __str__(self) -> str:
        """The pass as a pipeline element: `name{opt=v,...}` (every option spelled out), which
        `parse_pipeline` reads back to an equal pass."""
        opts = ",".join(f"{k}={spell(v)}" for k, v in self.options().items())
        return f"{self.name}{{{opts}}}" if opts else self.name


def spell(v: object) -> str:
    """An option value as a pipeline string writes it (strings with special characters, the
    empty string and the string "none" quoted)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, str) and (not v or v == "none" or re.search(r'[\s,{}="\\]', v)):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(v)


# parsing and verifying, with the offending line ------------------------------------------------
_LLVM_LOC = re.compile(r"^<string>:(\d+):(\d+): error: (.*)$", re.M)


def parse_ir(text: str, what: str, source: str = "<module>",
             context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    """`text` parsed and verified; IRError naming `source`:line:col and showing the line."""
    try:
        mod = llvmctx.parse(text, context)
    except RuntimeError as e:
        msg = str(e)
        m = _LLVM_LOC.search(msg)
        if m is None:
            raise IRError(f"{what} does not parse: {msg.strip()}") from e
        snippet = msg[m.end():].strip("\n")
        raise IRError(f"{what} does not parse: {m.group(3)}",
                      Location(source, int(m.group(1)), int(m.group(2))), snippet) from e
    verify_ir(mod, what, source, text)
    return mod


def verify_ir(mod: llvm.ModuleRef, what: str, source: str = "<module>",
              text: str | None = None) -> None:
    """LLVM's verifier on `mod`; IRError with the first instruction it quotes, located in `text`
    (the module's printed form when not given)."""
    try:
        mod.verify()
    except RuntimeError as e:
        first, *quoted = str(e).strip().splitlines() or ["(no message)"]
        lines = (text if text is not None else str(mod)).splitlines()
        for q in quoted:
            for i, line in enumerate(lines):
                if q.strip() and line.strip() == q.strip():
                    raise IRError(f"{what} does not verify: {first}", Location(source, i + 1),
                                  "\n".join(quoted)) from e
        raise IRError(f"{what} ({source}) does not verify: {first}", None,
                      "\n".join(quoted)) from e
