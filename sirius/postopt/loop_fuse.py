"""`loop-fuse`: merge the adjacent loops of a fused kernel's fragments (issue 14, items 2 and 7).

A vertical fusion puts fragments one after another in one thread: QKV's three projections
become three reduction loops over the same `k`, each loading `X[s][k]`. The `noalias` facts of
`alias-facts` are true, yet no load of one loop is available to the next, so GVN keeps all
three (BENCHMARKS.md, "alias-facts"). This pass runs LLVM's own loop fusion (`LoopFusePass`,
`opt -passes='function(loop-simplify,lcssa,loop-fusion)'` of the clang-22 toolchain; llvmlite
does not expose it) on the module; the `llvm-opt` round after it then shares the loads of the
merged loop and removes the repeated index arithmetic.

LLVM fuses two loops only when they are adjacent, control-flow equivalent, have the same trip
count and its dependence analysis proves that no iteration of the second loop needs a later
iteration of the first. That is a single-thread argument. It holds for the whole kernel only
where threads do not communicate during the kernel, so the pass leaves alone (marks `optnone`
for LLVM, and checks afterwards that they are unchanged) every function that:

- calls a barrier, fence, atomic, warp-vote/shuffle or other `llvm.nvvm.*` intrinsic that may
  touch memory or is `convergent`;
- has `atomicrmw`, `cmpxchg`, `fence`, a volatile access or inline asm;
- calls a function that is not an LLVM intrinsic or a libdevice `__nv_*` function, or calls
  through a pointer.

In a function with none of these, two threads that touch one address during the kernel race,
and the program has no defined result; LLVM's other passes make the same assumption.

Refused: a module for another target (as `llvm-opt`), or an `opt` that cannot be run.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sirius.frontend.toolchain import find_opt
from sirius.postopt.base import (
    HostRewrite,
    ModulePass,
    PassContext,
    PassError,
    PassInput,
    require_device,
)

__all__ = ["LoopFuse", "functions_of", "run_opt", "unsafe_reason"]

_DEFINE = re.compile(r'^define\b[^@]*@("?)([-\w.$]+)\1\(')
_DECLARE = re.compile(r'^declare\b[^@]*@("?)([-\w.$]+)\1\(.*?\)\s*(.*)$')
_GROUP = re.compile(r"^attributes #(\d+) = \{ (.*) \}$")
_CALL = re.compile(r"\bcall\b(?:[^(@%]|\([^)]*\))*?([@%])(\"?)([-\w.$]+)\2\(")
_LOOP = re.compile(r"!llvm\.loop !\d+")
_META = re.compile(r",? ![\w.]+ !\d+")  # a metadata attachment (!dbg, !tbaa, !llvm.loop ...)
_UNSAFE_OPS = (("atomicrmw", re.compile(r"\batomicrmw\b")), ("cmpxchg", re.compile(r"\bcmpxchg\b")),
               ("fence", re.compile(r"^\s*fence\b")), ("a volatile access",
                                                        re.compile(r"\b(load|store) volatile\b")),
               ("inline asm", re.compile(r"\bcall\b[^=]*\basm\b")))
_PREDS = re.compile(r"^(\S+:)\s+; preds = .*$")  # a label's predecessors, in any order
_PURE = re.compile(r"\bmemory\(none\)|\breadnone\b")


def functions_of(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Every defined function: name -> (index of its `define` line, index of its `}`)."""
    out, i = {}, 0
    while i < len(lines):
        if m := _DEFINE.match(lines[i]):
            j = i
            while lines[j] != "}":
                j += 1
            out[m.group(2)] = (i, j)
            i = j
        i += 1
    return out


def _groups(lines: list[str]) -> dict[str, str]:
    return {m.group(1): m.group(2) for ln in lines if (m := _GROUP.match(ln))}


def _declared(lines: list[str], groups: dict[str, str]) -> dict[str, str]:
    """Declared function -> its attributes, attribute groups spelled out."""
    out = {}
    for ln in lines:
        if m := _DECLARE.match(ln):
            out[m.group(2)] = re.sub(r"#(\d+)", lambda g: groups.get(g.group(1), ""), m.group(3))
    return out


def unsafe_reason(body: list[str], declared: dict[str, str]) -> str | None:
    """Why a function's threads may communicate during the kernel (so a single-thread proof
    does not cover it); None when they cannot."""
    for ln in body:
        for what, pat in _UNSAFE_OPS:
            if pat.search(ln):
                return what
        for m in _CALL.finditer(ln):
            sigil, name = m.group(1), m.group(3)
            if sigil == "%":
                return "an indirect call"
            if name.startswith("llvm.dbg.") or name.startswith("__nv_"):
                continue
            if not name.startswith("llvm."):
                return f"a call to {name}"
            attrs = declared.get(name, "")
            if "convergent" in attrs or (name.startswith("llvm.nvvm.")
                                          and not _PURE.search(attrs)):
                return f"a call to {name}"
    return None


def _normal(body: list[str]) -> list[str]:
    """A body without metadata attachments, debug records and attribute group numbers (opt
    numbers metadata and attribute groups afresh when it prints a module)."""
    return [re.sub(r"#\d+", "#", _META.sub("", _PREDS.sub(r"\1", ln))) for ln in body
            if not ln.lstrip().startswith("#dbg_")]


def _mark(lines: list[str], funcs: dict[str, tuple[int, int]], names: set[str]) -> list[str]:
    """`lines` with `optnone noinline` on the definitions of `names`."""
    out = list(lines)
    for n in names:
        i = funcs[n][0]
        out[i] = re.sub(r"(\)[^)]*?)(\s*(?:#\d+\s*)?(?:!dbg !\d+\s*)?\{)$",
                        r"\1 optnone noinline\2", out[i], count=1)
        if "optnone" not in out[i]:
            raise PassError(f"loop-fuse: cannot mark {n} optnone: {out[i][:120]}")
    return out


def _unmark(lines: list[str], names: set[str], had_noinline: dict[str, bool]) -> list[str]:
    """Remove the `optnone` (and the `noinline` `_mark` added) from `names`' definitions: each
    gets an attribute group of its own, its group's attributes without them (opt merges equal
    attribute sets, so a group may also hold functions that had `optnone` before the pass,
    a device loop's megakernel body: those keep it)."""
    funcs = functions_of(lines)
    attrs_of = _groups(lines)
    top = max((int(g) for g in attrs_of), default=-1)
    out = list(lines)
    new_groups, old = [], set()
    for n in sorted(names):
        i = funcs[n][0]
        m = re.search(r"#(\d+)(\s*(?:!dbg !\d+\s*)?\{)$", out[i])
        if m is None or m.group(1) not in attrs_of:
            raise PassError(f"loop-fuse: {n} lost its attribute group")
        attrs = [a for a in attrs_of[m.group(1)].split(" ")
                 if a and a != "optnone" and (a != "noinline" or had_noinline[n])]
        top += 1
        old.add(m.group(1))
        out[i] = out[i][:m.start()] + f"#{top}" + m.group(2)
        new_groups.append(f"attributes #{top} = {{ {' '.join(attrs)} }}")
    # the groups the marked functions had, where nothing names them any more
    used = {g for ln in out if not _GROUP.match(ln) for g in re.findall(r"#(\d+)\b", ln)}
    out = [ln for ln in out if not ((m := _GROUP.match(ln)) and m.group(1) in old - used)]
    return out + new_groups


def _has_attr(lines: list[str], funcs, name: str, groups, attr: str) -> bool:
    """Whether function `name`'s definition has attribute `attr` (in its line or group)."""
    define = lines[funcs[name][0]]
    attrs = " ".join(groups.get(g, "") for g in re.findall(r"#(\d+)", define))
    return attr in attrs.split(" ") or f" {attr} " in define


@dataclass(frozen=True, slots=True)
class LoopFuse(ModulePass):
    """LLVM's loop fusion on functions whose threads do not communicate (then llvm-opt)."""

    name: ClassVar[str] = "loop-fuse"

    def run(self, module: PassInput, ctx: PassContext) -> HostRewrite | str:
        text = module.text
        require_device(text, self.name, ctx.source)
        raw = text.splitlines()
        if not any(sum(len(_LOOP.findall(ln)) for ln in raw[a:b]) > 1
                   for a, b in functions_of(raw).values()):
            return text  # no function with two loops: nothing to fuse, no parse and print
        lines = str(module.peek()).splitlines()  # as LLVM prints it (intrinsics upgraded)
        funcs = functions_of(lines)
        groups = _groups(lines)
        declared = _declared(lines, groups)
        unsafe = {n: r for n, (a, b) in funcs.items()
                  if (r := unsafe_reason(lines[a + 1:b], declared))}
        loops_before = {n: sum(len(_LOOP.findall(ln)) for ln in lines[a:b])
                        for n, (a, b) in funcs.items()}
        candidates = [n for n in funcs if n not in unsafe and loops_before[n] > 1]
        if not candidates:
            return text
        # functions that are `optnone` already (a device loop's megakernel body) stay as
        # they are: opt leaves them alone, and unmarking them would take it away
        marked = {n for n in unsafe if not _has_attr(lines, funcs, n, groups, "optnone")}
        had = {n: _has_attr(lines, funcs, n, groups, "noinline") for n in marked}
        out_text = self._opt("\n".join(_mark(lines, funcs, marked)) + "\n", ctx)
        out_lines = out_text.splitlines()
        out_lines = _unmark(out_lines, marked, had) if marked else out_lines
        after = functions_of(out_lines)
        for n in marked:
            a, b = funcs[n]
            c, d = after[n]
            if _normal(lines[a + 1:b]) != _normal(out_lines[c + 1:d]):
                raise PassError(f"{self.name}: {n} ({unsafe[n]}) was changed though it was "
                                "marked optnone; the pass refuses the module")
        notes = []
        for n in candidates:
            c, d = after[n]
            now = sum(len(_LOOP.findall(ln)) for ln in out_lines[c:d])
            if now < loops_before[n]:
                notes.append(f"{n}: {loops_before[n]} loops -> {now}")
        if not notes:
            return text
        return HostRewrite("\n".join(out_lines) + "\n", ctx.host_program, tuple(notes))

    def _opt(self, text: str, ctx: PassContext) -> str:
        return run_opt(text, "function(loop-simplify,lcssa,loop-fusion)", self.name, ctx.source)


def run_opt(text: str, pipeline: str, who: str, source: str) -> str:
    """`text` through the toolchain's `opt -passes=PIPELINE` (a pass llvmlite does not expose);
    PassError, naming pass `who` and module `source`, when opt cannot run or fails."""
    exe = find_opt()
    with tempfile.TemporaryDirectory(prefix=f"sirius-{who}-") as d:
        src, dst = Path(d) / "in.ll", Path(d) / "out.ll"
        src.write_text(text)
        try:
            r = subprocess.run([exe, "-S", f"-passes={pipeline}", str(src), "-o", str(dst)],
                               capture_output=True, text=True, timeout=600)
        except OSError as e:
            raise PassError(f"{who}: cannot run {exe}: {e}") from e
        if r.returncode != 0:
            raise PassError(f"{who}: opt failed on {source}: "
                            + (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0])
        return dst.read_text()
