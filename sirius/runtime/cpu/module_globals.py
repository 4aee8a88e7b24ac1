"""Module globals of device code on the CPU executor: red zones, names, sizes.

Every global the device module defines (`__device__` and `__constant__` variables, clang's
constant arrays and strings; not `__shared__` arrays, which live in `@__sirius_smem`) is
rewritten from type `T` to `<{ T, [256 x i8] }>`: its address is still that of its `T`, and the
256 bytes after it belong to no global, so the bounds checker reports an access just past it
instead of accepting it as one into the next global. Its source name (from the debug info)
names it in reports. An `externally_initialized constant` (a `__constant__` variable, which the
host may write with cudaMemcpyToSymbol) becomes a `global`: the JIT would place a constant in
read-only memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.analysis.irlex import split_top
from sirius.analysis.irtypes import type_size
from sirius.analysis.irview import ModuleView


@dataclass(frozen=True, slots=True)
class ModuleGlobal:
    """A global variable of the device module, as the bounds checker and run resets see it."""

    name: str      # the IR name (no @)
    label: str     # the source name when debug info has it (`g`, `table`), else the IR name
    bytes: int
    mutable: bool  # `global`, not `constant`: restored to its initializer before every run


GLOBAL_REDZONE = 256


_GLOBAL_DEF = re.compile(r'@("[^"]+"|[-\w.$]+) = (.*?\b(?:global|constant) )')


def module_global(view: ModuleView, line: str) -> tuple[ModuleGlobal, str] | None:
    """A module global's definition with a red zone appended (see the module docstring), or
    None for what is not one (declarations, shared arrays, `llvm.*`, zero-sized types)."""
    m = _GLOBAL_DEF.match(line)
    if not m or " external " in f" {m.group(2)}" or "addrspace(3)" in m.group(2):
        return None
    name = m.group(1).strip('"')
    gv = view.globals.get(name)
    if name.startswith("llvm.") or gv is None:
        return None
    rest = line[m.end():]
    if not rest.startswith(gv.type + " "):
        return None
    size = type_size(gv.type, view.struct_bodies)
    if size <= 0:
        return None
    parts = split_top(rest[len(gv.type) + 1:], strip=False)  # commas in c"a,b" kept
    init, attrs = parts[0].strip(), ",".join(parts[1:])
    pad = f"[{GLOBAL_REDZONE} x i8]"
    wrapped = "zeroinitializer" if init == "zeroinitializer" else \
        f"<{{ {gv.type} {init}, {pad} zeroinitializer }}>"
    head = line[:m.end()]
    if "externally_initialized" in m.group(2) and m.group(2).rstrip().endswith("constant"):
        head = head[:head.rindex("constant")] + "global "
    text = f"{head}<{{ {gv.type}, {pad} }}> {wrapped}" + (f",{attrs}" if attrs else "")
    dbg = re.search(r"!dbg !(\d+)", attrs)
    label = None
    if dbg:
        var = view.debug.field(int(dbg.group(1)), "var")
        if var and var.startswith("!") and var[1:].isdigit():
            label = view.debug.string(int(var[1:]), "name")
    mutable = m.group(2).rstrip().endswith("global")
    return ModuleGlobal(name, label or name, size, mutable), text


def ir_name(name: str) -> str:
    return name if re.fullmatch(r"[-\w.$]+", name) else f'"{name}"'
