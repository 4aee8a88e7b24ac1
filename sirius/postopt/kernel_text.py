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

__all__ = ["BODY_SUFFIX", "KernelText", "ModuleEdit", "Param", "kernels_of", "split_top"]

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

    def wrapper(self, name: str, args: list[str], prelude: tuple[str, ...] = (),
                suffix: str = BODY_SUFFIX) -> list[str]:
        """A ptx_kernel `name` with this kernel's signature and attribute group that runs the
        `prelude` instructions and calls the body (`self.name + suffix`) with `args` (IR
        values, one per parameter, typed); its parameters are `%a0`, `%a1`, ..."""
        params = ", ".join(f"{p.type}{' ' + p.attrs if p.attrs else ''} %a{i}"
                           for i, p in enumerate(self.params))
        head = self.head[:self.head.rindex("@")] + f"@{name}("
        group = f" {self.attr_group}" if self.attr_group else ""
        return [f"{head}{params}){group} {{", *(f"  {x}" for x in prelude),
                f"  call void @{self.name}{suffix}(" + ", ".join(args) + ")", "  ret void", "}",
                ""]

    def body_define(self, suffix: str = BODY_SUFFIX) -> str:
        """The define line of the body: internal, not a kernel, always inlined."""
        head = self.head[:self.head.rindex("@")]
        head = re.sub(r"\b(dso_local|ptx_kernel|dllexport)\s+", "", head)
        head = re.sub(r"^define\s+(?:(?:external|weak_odr|linkonce_odr|weak|linkonce)\s+)?",
                      "define internal ", head)
        params = ", ".join(f"{p.type}{' ' + p.attrs if p.attrs else ''}"
                           f"{' ' + p.name if p.name else ''}" for p in self.params)
        tail = re.sub(r"\blocal_unnamed_addr\b\s*", "", self.tail.lstrip())
        return f"{head}@{self.name}{suffix}({params}) alwaysinline {tail}"


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


_REFUSED_ATTRS = re.compile(r"\b(byval|byref|sret|inalloca|preallocated)\b")


class ModuleEdit:
    """A module's text with kernels replaced by new text (a body plus wrappers): the attribute
    groups a body needs without `noinline` (clang puts it on every kernel) are added at the
    end. `kernels` are the module's kernels; `replace(name, text)` and then `text()`."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.kernels = kernels_of(self.lines)
        self.groups: dict[str, str] = {}
        for line in self.lines:
            m = re.match(r"attributes (#\d+) = \{(.*)\}", line)
            if m:
                self.groups[m.group(1)] = m.group(2)
        self._inlinable: dict[str, str] = {}  # attribute group -> the same without noinline
        self._next = max((int(g[1:]) for g in self.groups), default=-1) + 1
        self._replaced: dict[str, list[str]] = {}

    def wrappable(self, k: KernelText, suffix: str) -> bool:
        """Whether `k` can become a wrapper around a body `k.name + suffix`: its parameters
        are passed as plain values (no byval & co.), it is not optnone, and the body's name
        is free."""
        if any(_REFUSED_ATTRS.search(p.attrs) for p in k.params):
            return False
        if re.search(r"\boptnone\b", k.tail + " " + self.groups.get(k.attr_group, "")):
            return False
        return not any(f"@{k.name}{suffix}(" in line for line in self.lines)

    def body(self, k: KernelText, suffix: str, rewrite=None) -> str:
        """The kernel's definition as an internal always-inlined body `k.name + suffix`;
        `rewrite(line)` may change each line of it."""
        head = k.body_define(suffix)
        g = k.attr_group
        if g and re.search(r"\bnoinline\b", self.groups.get(g, "")):
            if g not in self._inlinable:
                self._inlinable[g] = f"#{self._next}"
                self._next += 1
            head = re.sub(rf"{g}\b", self._inlinable[g], head, count=1)
        out = [re.sub(r"\bnoinline\s+", "", head)]
        for line in self.lines[k.start + 1:k.end + 1]:
            out.append(rewrite(line) if rewrite else line)
        return "\n".join(out) + "\n"

    def replace(self, name: str, text: list[str]) -> None:
        self._replaced[name] = text

    def changed(self) -> bool:
        return bool(self._replaced)

    def text(self) -> str:
        out: list[str] = []
        by_start = {k.start: k for n, k in self.kernels.items() if n in self._replaced}
        i = 0
        while i < len(self.lines):
            k = by_start.get(i)
            if k is None:
                out.append(self.lines[i])
                i += 1
                continue
            out.extend(self._replaced[k.name])
            i = k.end + 1
        for g, new in self._inlinable.items():
            kept = re.sub(r"\bnoinline\b\s*", "", self.groups[g])
            out.append(f"attributes {new} = {{ {kept} }}")
        return "\n".join(out) + "\n"
