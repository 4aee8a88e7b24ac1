"""Sizes and field offsets of LLVM types given as text (x86-64 / nvptx64 layouts agree on these)."""

from __future__ import annotations

import re

_PRIM = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "i128": 16, "half": 2, "bfloat": 2,
         "float": 4, "double": 8, "x86_fp80": 16, "fp128": 16, "ptr": 8}


def _split_top(body: str) -> list[str]:
    """Split a comma list at nesting depth 0."""
    out, depth, cur = [], 0, []
    for ch in body:
        if ch in "[{<(":
            depth += 1
        elif ch in "]}>)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


class TypeTable:
    def __init__(self, struct_bodies: dict[str, str]):
        self.structs = struct_bodies

    def size_align(self, ty: str) -> tuple[int, int]:
        ty = ty.strip()
        if ty.startswith("ptr"):
            return 8, 8
        if ty in _PRIM:
            s = _PRIM[ty]
            return s, min(s, 16)
        if m := re.fullmatch(r"i(\d+)", ty):
            s = (int(m.group(1)) + 7) // 8
            return s, min(s, 8)
        if m := re.fullmatch(r"\[(\d+) x (.+)\]", ty):
            s, a = self.size_align(m.group(2))
            return int(m.group(1)) * s, a
        if m := re.fullmatch(r"<(\d+) x (.+)>", ty):
            s, _ = self.size_align(m.group(2))
            total = int(m.group(1)) * s
            return total, min(total, 16)
        if ty.startswith("<{") and ty.endswith("}>"):
            fields = _split_top(ty[2:-2])
            return sum(self.size_align(f)[0] for f in fields), 1
        if ty.startswith("{") and ty.endswith("}"):
            size, align = 0, 1
            for f in _split_top(ty[1:-1]):
                fs, fa = self.size_align(f)
                size = (size + fa - 1) // fa * fa + fs
                align = max(align, fa)
            return (size + align - 1) // align * align, align
        if ty.startswith("%"):
            body = self.structs.get(ty)
            if body is None or body == "opaque":
                raise ValueError(f"unknown struct type {ty}")
            return self.size_align(body)
        raise ValueError(f"cannot size LLVM type {ty!r}")

    def size(self, ty: str) -> int:
        return self.size_align(ty)[0]

    def field_offset(self, ty: str, index: int) -> tuple[int, str]:
        """Byte offset and type of field `index` of a struct or element of an array/vector."""
        ty = ty.strip()
        if ty.startswith("%"):
            ty = self.structs[ty]
        if m := re.fullmatch(r"[\[<](\d+) x (.+)[\]>]", ty):
            return index * self.size(m.group(2)), m.group(2)
        packed = ty.startswith("<{")
        fields = _split_top(ty[2:-2] if packed else ty[1:-1])
        off = 0
        for i, f in enumerate(fields):
            fs, fa = self.size_align(f)
            if not packed:
                off = (off + fa - 1) // fa * fa
            if i == index:
                return off, f
            off += fs
        raise ValueError(f"field {index} out of range in {ty}")
