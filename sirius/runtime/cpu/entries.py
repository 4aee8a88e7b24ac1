"""The entry points of the CPU executor's host module: `__sirius_thread_N`, one thread of a
kernel, which unpacks a CUDA-style argument array (`void **`) and calls the kernel; and for a
megakernel (fusion's grid arrangement, docs/fusion-megakernel.md) its segments, each an entry of
its own that calls the segment function as the kernel's body does. Also the argument-list
parsing `rewrite.py` shares."""

from __future__ import annotations

import re

from sirius.analysis.irview import Function
from sirius.fusion.spec import GRID_SYNC

_PARAM_ATTRS = {"noundef", "signext", "zeroext", "inreg", "nonnull", "returned"}


def split_top(s: str) -> list[str]:
    """Split at commas that are not inside (), [], {} or <>."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return out


def call_args(line: str, callee: str) -> tuple[list[str], str]:
    """The argument texts of a call to `@callee` and what follows the closing parenthesis."""
    i = line.index(f"@{callee}(") + len(callee) + 2
    depth = 1
    j = i
    while depth:
        depth += {"(": 1, ")": -1}.get(line[j], 0)
        j += 1
    inner = line[i:j - 1].strip()
    return ([a.strip() for a in split_top(inner)] if inner else []), line[j:]


def arg_value(arg: str) -> tuple[str, str]:
    """`i32 noundef %x` -> ("i32", "%x")."""
    ty, rest = arg.split(" ", 1)
    words = rest.split(" ")
    while len(words) > 1 and words[0] in _PARAM_ATTRS:
        words.pop(0)
    return ty, " ".join(words)


def thread_wrapper(index: int, header: str, fn: Function, loops: bool = False) -> str:
    """`__sirius_thread_N(ptr args)`, one thread of kernel N; for a work-item-loop kernel
    `i32 __sirius_thread_N(ptr args, ptr frame, i32 state)`, one step of one thread."""
    name = re.search(r'@("[^"]+"|[-\w.$]+)\(', header).group(1)
    params, _ = call_args(header, name)
    lines = [f"define i32 @__sirius_thread_{index}(ptr %args, ptr %frame, i32 %state) {{"
             if loops else f"define void @__sirius_thread_{index}(ptr %args) {{", "entry:"]
    passed = []
    for i, (arg, ptext) in enumerate(zip(fn.args, params, strict=True)):
        ty = arg.type
        lines.append(f"  %p{i} = getelementptr inbounds ptr, ptr %args, i64 {i}")
        lines.append(f"  %a{i} = load ptr, ptr %p{i}, align 8")
        byval = re.search(r"byval\(([^)]*)\)", ptext)
        if byval:
            passed.append(f"ptr byval({byval.group(1)}) %a{i}")
        else:
            lines.append(f"  %v{i} = load {ty}, ptr %a{i}, align 1")
            passed.append(f"{ty} %v{i}")
    if loops:
        passed += ["ptr %frame", "i32 %state"]
        lines += [f"  %next = call i32 @{name}({', '.join(passed)})", "  ret i32 %next", "}"]
    else:
        lines += [f"  call void @{name}({', '.join(passed)})", "  ret void", "}"]
    return "\n".join(lines)


def segments_of(fn: Function, defined: set[str]) -> list[tuple[str, list[str]]] | str | None:
    """A megakernel's segments, in order, when `fn` is one: (the function called, the call's
    argument texts) for each call; its body is only calls of functions defined in the module,
    `sirius_grid_sync()` between them, and `ret void`. None when `fn` has no grid barrier; a
    sentence when it has one in another form (the executor cannot say what it means then)."""
    calls = [ins for b in fn.blocks for ins in b.instrs
             if ins.opcode == "call" and ins.callee is not None]
    if not any(c.callee.name == GRID_SYNC for c in calls):
        return None
    segments: list[tuple[str, list[str]]] = []
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.opcode == "ret" and len(fn.blocks) == 1:
                continue
            callee = ins.callee.name if ins.opcode == "call" and ins.callee is not None \
                else None
            if callee == GRID_SYNC:
                continue
            if callee in defined and callee != fn.name:
                segments.append((callee, call_args(ins.text, callee)[0]))
                continue
            return (f"has a grid barrier ({GRID_SYNC}) outside the form the executor runs "
                    f"(segment calls and grid barriers only): {ins.text.strip()[:80]}")
    return segments


def segment_wrapper(index: int, header: str, fn: Function, callee: str, call: list[str],
                     loops: bool) -> str:
    """`__sirius_thread_N`: one thread of one segment of megakernel `fn`, which unpacks the
    kernel's arguments and calls the segment as the kernel's body does (constants and poison
    where the body passes them)."""
    lines = thread_wrapper(index, header, fn, loops).split("\n")[:-3]  # without call, ret, }
    own = {f"%{a.name}": i for i, a in enumerate(fn.args)}
    name = re.search(r'@("[^"]+"|[-\w.$]+)\(', header).group(1)
    params, _ = call_args(header, name)
    args = []
    for a in call:
        i = own.get(arg_value(a)[1])
        if i is None:  # a constant or poison, as the kernel's body passes it
            args.append(a)
        else:
            byval = re.search(r"byval\(([^)]*)\)", params[i])
            args.append(f"{a.rsplit(' ', 1)[0]} {'%a' if byval else '%v'}{i}")
    if loops:
        args += ["ptr %frame", "i32 %state"]
        lines += [f"  %next = call i32 @{_quote(callee)}({', '.join(args)})", "  ret i32 %next"]
    else:
        lines += [f"  call void @{_quote(callee)}({', '.join(args)})", "  ret void"]
    return "\n".join(lines + ["}"])


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[-\w.$]+", name) else f'"{name}"'
