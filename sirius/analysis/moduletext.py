"""A module's functions as canonical text: what each one runs, without what cannot change it.

    mt = ModuleText.of(device_ir)
    mt.canonical("kernel")   # the function's canonical closure text
    mt.closure("kernel")     # the names the function reaches (functions, globals)

A function's canonical text is its definition and everything it refers to, in the order first
referred to: the functions it calls (their definitions, recursively, or their declarations), the
global variables it uses (their definition lines), the attribute groups (`#N`, replaced by their
contents) and the metadata nodes (`!N`, renumbered in order of first use, so that two modules
that number their metadata differently give the same text), plus the module's data layout. What
cannot change what the code computes is left out: comments, block predecessor notes and debug
information (`!dbg` attachments, `#dbg_*` records, `llvm.dbg.*` calls, the `!DI*` nodes loop
metadata names), and the attribute groups of intrinsics' declarations (LLVM gives an intrinsic
its own attributes, whatever the text says).

`sirius verify` reads it to decide which kernels' launches the fused runs in the later orders
may take from the first order's run (sirius/verify/replay.py): what a kernel reaches (module
variables, external functions) and which synchronisation it has.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import ClassVar

__all__ = ["ModuleText"]

_NAME = r'(?:"(?:[^"\\]|\\.)*"|[-\w.$]+)'
_DEFINE = re.compile(r"^define\b[^@]*@(" + _NAME + r")\(", re.M)
_DECLARE = re.compile(r"^declare\b[^@]*@(" + _NAME + r")\(", re.M)
_GLOBAL = re.compile(r"^@(" + _NAME + r") = (.*)$", re.M)
_META = re.compile(r"^!(\d+) = (.*)$", re.M)
_LOCAL = re.compile(r"^(?:define|@" + _NAME + r" =) (?:internal|private)\b")
_ATTRS = re.compile(r"^attributes #(\d+) = (.*)$", re.M)
_LAYOUT = re.compile(r'^target datalayout = ".*"$', re.M)
_AT = re.compile(r"@(" + _NAME + r")")
_REF = re.compile(r"(?<![\w.$])([!#])(\d+)\b")
_DBG = re.compile(r",? !dbg !\d+")
_DEBUG_NODE = re.compile(r"(?:distinct )?!DI")
_DBG_LINE = re.compile(r"^\s*(?:#dbg_\w+\(|(?:tail |notail |musttail )?call void @llvm\.dbg\.)")
_GROUP = re.compile(r" #\d+\b")
_LABEL = re.compile(r"^(" + _NAME + r"):.*$")


def _clean(body: str) -> list[str]:
    """A definition's lines without comments, predecessor notes and debug information."""
    out = []
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(";") or _DBG_LINE.match(line):
            continue
        m = _LABEL.match(line)
        if m is not None and not line.startswith(" "):
            out.append(m.group(1) + ":")
            continue
        out.append(_DBG.sub("", line.rstrip()))
    return out


class ModuleText:
    """The functions, declarations, global variables, attribute groups and metadata nodes of one
    module's printed text. `ModuleText.of(text)` keeps the last two it made."""

    _MADE: ClassVar[dict[str, ModuleText]] = {}

    @classmethod
    def of(cls, text: str) -> ModuleText:
        mt = cls._MADE.get(text)
        if mt is None:
            if len(cls._MADE) >= 2:
                cls._MADE.pop(next(iter(cls._MADE)))
            mt = cls._MADE[text] = cls(text)
        return mt

    def __init__(self, text: str):
        self.text = text
        self.defines: dict[str, tuple[int, int]] = {}
        for m in _DEFINE.finditer(text):
            end = text.find("\n}", m.end())
            self.defines[m.group(1)] = (m.start(), len(text) if end < 0 else end + 2)
        self.declares = {m.group(1): m.start() for m in _DECLARE.finditer(text)}
        self.globals = {m.group(1): m.group(2) for m in _GLOBAL.finditer(text)}
        self.meta = {m.group(1): m.group(2) for m in _META.finditer(text)}
        self.attrs = {m.group(1): m.group(2) for m in _ATTRS.finditer(text)}
        lay = _LAYOUT.search(text)
        self.layout = lay.group(0) if lay else ""
        self._canon: dict[str, tuple[str, tuple[str, ...]]] = {}

    def definition(self, name: str) -> str | None:
        """The text of the function's definition, or None where the module has none."""
        span = self.defines.get(name)
        return None if span is None else self.text[span[0]:span[1]]

    def _line(self, start: int) -> str:
        end = self.text.find("\n", start)
        return self.text[start:len(self.text) if end < 0 else end]

    def _walk(self, name: str) -> tuple[str, tuple[str, ...]]:
        """The canonical closure text of function `name` and the names it reaches."""
        order: dict[str, int] = {}
        todo: list[str] = []
        named: list[str] = []
        seen: set[str] = set()
        parts: list[str] = [self.layout]

        locals_: dict[str, int] = {}

        def rename(m: re.Match) -> str:  # an internal symbol's name is its place in the closure
            k = locals_.get(m.group(1))
            return m.group(0) if k is None else f"@.local{k}"

        def refs(line: str) -> str:
            def one(m: re.Match) -> str:
                kind, n = m.group(1), m.group(2)
                if kind == "#":
                    return "#{" + self.attrs.get(n, "?") + "}"
                if n not in order:
                    order[n] = len(order)
                    todo.append(n)
                return f"!m{order[n]}"
            for g in _AT.findall(line):
                if g not in seen:
                    seen.add(g)
                    named.append(g)
                    if self.internal(g):
                        locals_[g] = len(locals_)
            return _AT.sub(rename, _REF.sub(one, line))

        seen.add(name)
        named.append(name)
        i = 0
        while i < len(named):
            g = named[i]
            i += 1
            body = self.definition(g)
            if body is not None:
                parts.extend(refs(line) for line in _clean(body))
            elif g in self.globals:
                parts.append(_AT.sub(rename, f"@{g} = ") + refs(_DBG.sub("", self.globals[g])))
            elif g in self.declares:
                line = self._line(self.declares[g])
                if g.startswith("llvm."):  # an intrinsic's attributes are LLVM's, not the text's
                    line = _GROUP.sub("", line)
                parts.append(refs(line))
            else:
                parts.append(f"@{g} ?")
        k = 0
        while k < len(todo):  # metadata nodes reached, numbered in order of first use
            node = self.meta.get(todo[k], "?")
            if _DEBUG_NODE.match(node):  # debug information (loop metadata's locations)
                node = "debug"
            parts.append(f"!m{k} = " + refs(_DBG.sub("", node)))
            k += 1
        return "\n".join(parts), tuple(named)

    def canonical(self, name: str) -> str:
        if name not in self._canon:
            self._canon[name] = self._walk(name)
        return self._canon[name][0]

    def closure(self, name: str) -> tuple[str, ...]:
        """`name` and every function and global variable it reaches, in order of first use."""
        self.canonical(name)
        return self._canon[name][1]

    def internal(self, name: str) -> bool:
        """Whether a function or global variable of the module has internal or private linkage."""
        span = self.defines.get(name)
        head = self._line(span[0]) if span else f"@{name} = " + self.globals.get(name, "")
        return _LOCAL.match(head) is not None

    @cached_property
    def kernels(self) -> tuple[str, ...]:
        """The names of the module's kernels (`ptx_kernel` definitions)."""
        return tuple(n for n, (s, _) in self.defines.items()
                     if "ptx_kernel" in self._line(s).split("@", 1)[0])
