"""Kernels of a module's IR text, for passes that specialise them: where a kernel's definition
starts and ends, its parameters (type, attributes) split at top-level commas, and the
wrapper form `host-constants` and `common-base` write:

    define dso_local ptx_kernel void @k(ptr noundef %a0, i32 noundef %a1) #0 {   ; the kernel
      call void @k.sirius.body(ptr %a0, i32 128)                                  ; new args
      ret void
    }
    define internal void @k.sirius.body(ptr noundef %x, i32 noundef %n) alwaysinline #0 !dbg ..

The body keeps everything the kernel had (debug info, attributes); LLVM's inliner (the
`llvm-opt` pass after) puts it back into the kernel with the constants in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BODY_SUFFIX", "KernelText", "Param", "kernels_of", "split_top"]

BODY_SUFFIX = ".sirius.body"

_DEFINE = re.compile(r'^define\b[^@]*\bptx_kernel\b[^@]*@("?)([-\w.$]+)\1\(', re.M)
_OPEN, _CLOSE = "([{<", ")]}>"


def split_top(text: str) -> list[str]:
    """`text` split at commas outside (), [], {} and <> (an empty text: no parts)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _type_end(p: str) -> int:
    """Where the type at the start of a parameter text ends."""
    if p[0] in "{<[":
        depth = 0
        for i, ch in enumerate(p):
            if ch in _OPEN:
                depth += 1
            elif ch in _CLOSE:
                depth -= 1
                if depth == 0:
                    return i + 1
    m = re.match(r"ptr addrspace\(\d+\)|\S+", p)
    assert m is not None
    return m.end()


@dataclass(frozen=True, slots=True)
class Param:
    """One kernel parameter as written: its type, its attributes, its name (None: numbered)."""

    type: str
    attrs: str
    name: str | None

    @staticmethod
    def parse(text: str) -> Param:
        end = _type_end(text)
        rest = text[end:].strip()
        m = re.search(r"(?:^|\s)(%[-\w.$]+|%\"[^\"]*\")$", rest)
        name = m.group(1) if m else None
        attrs = rest[:m.start()].strip() if m else rest
        return Param(text[:end], attrs, name)


@dataclass(frozen=True, slots=True)
class KernelText:
    """A kernel's definition in the module text: lines [start, end] (the `define` line and the
    closing `}`), its name, its parameters, and what follows the parameter list on the define
    line (attributes, `#N`, `!dbg !M`, `{`)."""

    name: str
    start: int
    end: int
    head: str  # the define line up to and including '@name('
    params: tuple[Param, ...]
    tail: str  # after the closing ')' of the parameter list

    @property
    def attr_group(self) -> str:
        m = re.search(r"#\d+", self.tail)
        return m.group(0) if m else ""

    def wrapper(self, name: str, args: list[str]) -> list[str]:
        """A ptx_kernel `name` with this kernel's signature and attribute group that calls the
        body with `args` (IR values, one per parameter, typed)."""
        params = ", ".join(f"{p.type}{' ' + p.attrs if p.attrs else ''} %a{i}"
                           for i, p in enumerate(self.params))
        head = self.head[:self.head.rindex("@")] + f"@{name}("
        group = f" {self.attr_group}" if self.attr_group else ""
        return [f"{head}{params}){group} {{", f"  call void @{self.name}{BODY_SUFFIX}("
                + ", ".join(args) + ")", "  ret void", "}", ""]

    def body_define(self) -> str:
        """The define line of the body: internal, not a kernel, always inlined."""
        head = self.head[:self.head.rindex("@")]
        head = re.sub(r"\b(dso_local|ptx_kernel|dllexport)\s+", "", head)
        head = re.sub(r"^define\s+(?:(?:external|weak_odr|linkonce_odr|weak|linkonce)\s+)?",
                      "define internal ", head)
        params = ", ".join(f"{p.type}{' ' + p.attrs if p.attrs else ''}"
                           f"{' ' + p.name if p.name else ''}" for p in self.params)
        tail = re.sub(r"\blocal_unnamed_addr\b\s*", "", self.tail.lstrip())
        return f"{head}@{self.name}{BODY_SUFFIX}({params}) alwaysinline {tail}"


def _close_paren(line: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(line)):
        if line[i] in "([{<":
            depth += 1
        elif line[i] in ")]}>":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced parameter list")


def kernels_of(lines: list[str]) -> dict[str, KernelText]:
    """Every kernel (ptx_kernel) defined in the module, by name."""
    out: dict[str, KernelText] = {}
    for i, line in enumerate(lines):
        m = _DEFINE.match(line)
        if m is None:
            continue
        close = _close_paren(line, m.end() - 1)
        end = i
        while lines[end] != "}":
            end += 1
        params = tuple(Param.parse(p) for p in split_top(line[m.end():close]))
        out[m.group(2)] = KernelText(m.group(2), i, end, line[:m.end()], params,
                                     line[close + 1:])
    return out
