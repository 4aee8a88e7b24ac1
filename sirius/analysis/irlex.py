"""Lexing the printed text of an LLVM module, for the IR view's text reader (`irparse`) and the
code that cuts functions out of a module's text: function bodies and what they reference,
instruction lines, top-level commas and brackets, types, names."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

DBG_RE = re.compile(r", !dbg !(\d+)")
DBG_VALUE_RE = re.compile(r"#dbg_(?:value|declare)\((?:[^,%]*?) %([-\w.$]+), !(\d+),")


_DEFINE_RE = re.compile(r"^define [^\n]*?@(\"[^\"]+\"|[-\w.$]+)\(.*?^}$", re.M | re.S)


def instruction_lines(body: str) -> list[str]:
    """The instruction lines of one function's text, in order (labels, records, blanks dropped)."""
    out: list[str] = []
    for line in body.splitlines()[1:-1]:
        s = line.strip()
        if not s or s.startswith(";") or s.startswith("#dbg_") or not line.startswith("  "):
            continue
        if out and (line.startswith("   ") or s.startswith("]")):
            # an instruction printed on several lines (instructions are indented by two
            # spaces): a switch's cases and its `]`, invoke's `to label .. unwind label ..`,
            # a landingpad's clauses
            out[-1] += " " + s
            continue
        out.append(s)
    return out


_GLOBAL_REF_RE = re.compile(r'@("(?:[^"\\]|\\.)*"|[-\w.$]+)')


def definitions(text: str) -> dict[str, str]:
    """Each function a module's text defines, by name: its `define ... { ... }` text."""
    return {m.group(1).strip('"'): m.group(0) for m in _DEFINE_RE.finditer(text)}


def without_definitions(text: str, keep: Collection[str]) -> str:
    """A module's text with the definitions of the functions not in `keep` left out (their
    uses must be too: see `closure`)."""
    return _DEFINE_RE.sub(lambda m: m.group(0) if m.group(1).strip('"') in keep else "", text)


def closure(roots: Collection[str], bodies: dict[str, str]) -> set[str]:
    """`roots` and every function their bodies reference (`@name`: calls, function pointers),
    transitively, among the functions `bodies` defines."""
    todo = [n for n in roots if n in bodies]
    seen = set(todo)
    while todo:
        for m in _GLOBAL_REF_RE.finditer(bodies[todo.pop()]):
            name = m.group(1).strip('"')
            if name in bodies and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


class Unsupported(Exception):
    """The text has a construct this reader does not know: view the module through llvmlite."""


NAME = r'(?:"(?:[^"\\]|\\.)*"|[-\w.$]+)'


_SPECIAL_RE = re.compile(r'[][(){}<>",]')


def _top(s: str, i: int = 0) -> Iterator[tuple[re.Match, int]]:
    """The brackets and commas of `s` from `i` outside quoted strings, each with the bracket
    depth after it."""
    depth, quoted = 0, False
    for m in _SPECIAL_RE.finditer(s, i):
        ch = m.group()
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            depth += (ch in "([{<") - (ch in ")]}>")
            yield m, depth


def split_top(s: str, strip: bool = True) -> list[str]:
    """`s` split at commas outside brackets and quotes, the pieces stripped (`strip`)."""
    if not any(c in s for c in '([{<"'):
        parts = s.split(",")
    else:
        parts, start = [], 0
        for m, depth in _top(s):
            if depth == 0 and m.group() == ",":
                parts.append(s[start:m.start()])
                start = m.end()
        parts.append(s[start:])
    return [p.strip() for p in parts] if strip else parts


def close_group(s: str, i: int) -> int:
    """The index just past the bracket group that opens at s[i]."""
    for m, depth in _top(s, i):
        if depth == 0:
            return m.end()
    raise Unsupported(f"unbalanced brackets in {s!r}")


_STRUCT_NAME_RE = re.compile(r"%" + NAME)
_WORD_RE = re.compile(r"[a-z]\w*")


def read_type(s: str, i: int = 0) -> int:
    """The index just past the type that starts at s[i] (s[i] is not a space)."""
    if i >= len(s):
        raise Unsupported(f"no type in {s!r}")
    ch = s[i]
    if ch in "[{<":
        j = close_group(s, i)
    elif ch == "%":
        m = _STRUCT_NAME_RE.match(s, i)
        if m is None:
            raise Unsupported(f"no type in {s!r}")
        j = m.end()
    else:
        m = _WORD_RE.match(s, i)
        if m is None:
            raise Unsupported(f"no type in {s!r}")
        j = m.end()
        if m.group(0) == "ptr" and s.startswith(" addrspace(", j):
            j = s.index(")", j) + 1
        elif m.group(0) == "target":
            raise Unsupported("a target extension type")
    if s.startswith(" (", j):  # a function type: T (params)
        raise Unsupported(f"a function type in {s!r}")
    return j


def unquote(name: str) -> str:
    if name.startswith('"'):
        if "\\" in name:
            raise Unsupported(f"an escaped name {name}")
        return name[1:-1]
    return name
