"""Byte sizes and alignments of LLVM IR types spelled as text, under the NVPTX64 data layout.

`type_size("[16 x [17 x float]]") == 1088`. Sizes are LLVM's alloc sizes (what a global of the
type occupies): integers round up to their alignment, struct members are padded to their ABI
alignment unless the struct is packed (`<{ ... }>`), and named structs (`%struct.S`) are looked up
in the module's type definitions (`ModuleView.struct_bodies`).
"""

from __future__ import annotations

import re

_SCALARS = {"half": 2, "bfloat": 2, "float": 4, "double": 8, "fp128": 16, "x86_fp80": 16}
_TOKEN_RE = re.compile(r'\s*(<\{|\}>|[\[\]{}<>,]|%"[^"]+"|%[-\w.$]+|ptr(?: addrspace\(\d+\))?|\w+)')


class TypeParseError(ValueError):
    pass


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _round_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


class _Parser:
    def __init__(self, text: str, structs: dict[str, str], depth: int = 0):
        self.toks = _TOKEN_RE.findall(text)
        if "".join(self.toks).replace(" ", "") != re.sub(r"\s+", "", text):
            raise TypeParseError(f"cannot parse LLVM type {text!r}")
        self.pos = 0
        self.structs = structs
        self.depth = depth

    def next(self) -> str:
        if self.pos >= len(self.toks):
            raise TypeParseError("unexpected end of type")
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise TypeParseError(f"expected {tok!r}, got {got!r}")

    def type(self) -> tuple[int, int]:
        """(alloc size, ABI alignment) of the type at the cursor."""
        tok = self.next()
        if tok == "[":
            n = int(self.next())
            self.expect("x")
            size, align = self.type()
            self.expect("]")
            return n * size, align
        if tok == "<":
            n = int(self.next())
            self.expect("x")
            size, _ = self.type()
            self.expect(">")
            align = _pow2_at_least(max(n * size, 1))
            return _round_up(n * size, align), align
        if tok in ("{", "<{"):
            return self.struct(packed=tok == "<{")
        if tok.startswith("%"):
            body = self.structs.get(tok)
            if body is None or body.strip() == "opaque" or self.depth > 32:
                raise TypeParseError(f"no definition for struct type {tok}")
            sub = _Parser(body, self.structs, self.depth + 1)
            result = sub.type()
            return result
        if tok.startswith("ptr"):
            size = 4 if tok.endswith("addrspace(6)") else 8  # datalayout: p6:32:32
            return size, size
        if tok in _SCALARS:
            return _SCALARS[tok], _SCALARS[tok]
        if m := re.fullmatch(r"i(\d+)", tok):
            store = (int(m.group(1)) + 7) // 8
            align = min(_pow2_at_least(store), 16)
            return _round_up(store, align), align
        raise TypeParseError(f"unknown LLVM type {tok!r}")

    def struct(self, packed: bool) -> tuple[int, int]:
        close = "}>" if packed else "}"
        offset, struct_align = 0, 1
        if self.toks[self.pos] == close:
            self.pos += 1
            return 0, 1
        while True:
            size, align = self.type()
            if packed:
                align = 1
            offset = _round_up(offset, align) + size
            struct_align = max(struct_align, align)
            tok = self.next()
            if tok == close:
                return _round_up(offset, struct_align), struct_align
            if tok != ",":
                raise TypeParseError(f"expected ',' or {close!r}, got {tok!r}")


def _layout(ty: str, structs: dict[str, str] | None) -> tuple[int, int]:
    p = _Parser(ty, structs or {})
    result = p.type()
    if p.pos != len(p.toks):
        raise TypeParseError(f"trailing text in LLVM type {ty!r}")
    return result


def type_size(ty: str, structs: dict[str, str] | None = None) -> int:
    """Alloc size in bytes of an LLVM type string; `structs` maps `%name` to its body."""
    return _layout(ty, structs)[0]


def type_align(ty: str, structs: dict[str, str] | None = None) -> int:
    """ABI alignment in bytes of an LLVM type string."""
    return _layout(ty, structs)[1]


def _split_fields(body: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in body:
        depth += ch in "[{<(" and 1 or 0
        depth -= ch in "]}>)" and 1 or 0
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def field_offset(ty: str, index: int, structs: dict[str, str] | None = None) -> tuple[int, str]:
    """Byte offset and type of field `index` of a struct, or of element `index` of an array or
    vector: what a constant GEP index selects."""
    ty = ty.strip()
    if ty.startswith("%"):
        if not structs or ty not in structs:
            raise TypeParseError(f"unknown struct type {ty}")
        ty = structs[ty]
    if m := re.fullmatch(r"[\[<](\d+) x (.+)[\]>]", ty):
        return index * type_size(m.group(2), structs), m.group(2)
    packed = ty.startswith("<{")
    fields = _split_fields(ty[2:-2] if packed else ty[1:-1])
    off = 0
    for i, f in enumerate(fields):
        if not packed:
            off = _round_up(off, type_align(f, structs))
        if i == index:
            return off, f
        off += type_size(f, structs)
    raise TypeParseError(f"field {index} out of range in {ty}")


class TypeTable:
    """Sizes and field offsets of one module's types."""

    def __init__(self, structs: dict[str, str]):
        self.structs = structs

    def size(self, ty: str) -> int:
        return type_size(ty, self.structs)

    def field_offset(self, ty: str, index: int) -> tuple[int, str]:
        return field_offset(ty, index, self.structs)
