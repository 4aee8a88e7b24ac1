"""Small, exact helpers for rewriting LLVM IR text (llvmlite cannot mutate IR).

Everything here works on one print of a module: metadata numbers and attribute-group numbers are
only meaningful within the text they came from. Callers re-parse and verify after every rewrite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STRING = re.compile(r'"[^"]*"')
_REF = re.compile(r"!(\d+)\b")
NAME = r'(?:"[^"]+"|[-\w.$]+)'
_DEFINE = re.compile(r"^define [^\n]*?@(" + NAME + r")\(.*?^}$", re.M | re.S)
_MD_DEF = re.compile(r"^!(\d+) = (.*)$", re.M)
_ATTR_GROUP = re.compile(r"^attributes #(\d+) = \{ (.*) \}$", re.M)


def split_top(s: str, sep: str = ",") -> list[str]:
    """`s` split at `sep` outside (), [], {}, <> and quotes; pieces stripped, empty dropped."""
    out, depth, cur, quoted = [], 0, [], False
    for ch in s:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            if ch in "([{<":
                depth += 1
            elif ch in ")]}>":
                depth -= 1
            elif ch == sep and depth == 0:
                out.append("".join(cur).strip())
                cur = []
                continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


SYNC = "llvm.nvvm.barrier.cta.sync.aligned.all"  # __syncthreads (barrier 0, all threads)


def local_ref(name: str) -> str:
    """A local value's name as IR writes it after `%` (quoted when it must be)."""
    return name if re.fullmatch(r"[-\w.$]+", name) and not name[0].isdigit() else f'"{name}"'


def global_ref(name: str) -> str:
    """`@name` as IR writes it (quoted when it has characters an identifier cannot)."""
    return f"@{name}" if re.fullmatch(r"[-\w.$]+", name) else f'@"{name}"'


def functions(text: str) -> dict[str, tuple[int, int]]:
    """Name -> (start, end) character span of each function definition in `text`."""
    return {unquote(m.group(1)): (m.start(), m.end()) for m in _DEFINE.finditer(text)}


@dataclass(frozen=True, slots=True)
class Header:
    """A `define` line cut into pieces: `{prefix}@{name}({params}){suffix}`."""

    prefix: str  # "define dso_local ptx_kernel void "
    name: str
    params: tuple[str, ...]
    suffix: str  # " local_unnamed_addr #0 !dbg !2 {"

    def render(self) -> str:
        return f"{self.prefix}{global_ref(self.name)}({', '.join(self.params)}){self.suffix}"

    @property
    def attr_group(self) -> int | None:
        m = re.search(r"#(\d+)", self.suffix)
        return int(m.group(1)) if m else None

    @property
    def subprogram(self) -> int | None:
        m = re.search(r"!dbg !(\d+)", self.suffix)
        return int(m.group(1)) if m else None


def parse_header(line: str) -> Header:
    m = re.match(r"(define [^@]*)@(" + NAME + r")\(", line)
    if not m:
        raise ValueError(f"not a define line: {line[:80]}")
    i, depth = m.end(), 1
    while depth:
        c = line[i]
        if c == '"':
            i = line.index('"', i + 1)
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        i += 1
    params = tuple(split_top(line[m.end():i - 1]))
    return Header(m.group(1), unquote(m.group(2)), params, line[i:])


def param_name(param: str) -> str | None:
    m = re.search(r"%(" + NAME + r")$", param.strip())
    return unquote(m.group(1)) if m else None


# metadata ----------------------------------------------------------------------------------------
def metadata(text: str) -> dict[int, str]:
    """Numbered metadata nodes: id -> the text after `!id = `."""
    return {int(m.group(1)): m.group(2) for m in _MD_DEF.finditer(text)}


def refs(text: str) -> list[int]:
    """Metadata node numbers referenced by `text` (strings skipped)."""
    out: list[int] = []
    for part in _STRING.split(text):
        out.extend(int(x) for x in _REF.findall(part))
    return out


def remap_refs(text: str, mapping: dict[int, int]) -> str:
    """`text` with every `!n` in `mapping` replaced by `!mapping[n]` (strings untouched)."""
    if not mapping:
        return text
    pieces = []
    last = 0
    for m in _STRING.finditer(text):
        pieces.append(_REF.sub(lambda r: f"!{mapping.get(int(r.group(1)), int(r.group(1)))}",
                               text[last:m.start()]))
        pieces.append(m.group(0))
        last = m.end()
    pieces.append(_REF.sub(lambda r: f"!{mapping.get(int(r.group(1)), int(r.group(1)))}",
                           text[last:]))
    return "".join(pieces)


def max_metadata_id(text: str) -> int:
    ids = [int(x) for x in re.findall(r"^!(\d+) = ", text, re.M)]
    return max(ids, default=-1)


def clone_scope(md: dict[int, str], body: str, subprogram: int, first_id: int,
                linkage_name: str | None = None) -> tuple[str, dict[int, str]]:
    """Give a copy of a function its own debug scope.

    A DISubprogram belongs to one function, so a copy of a function body (a fragment) needs a
    fresh one, and so does every node that leads to it (lexical blocks, locations, variables,
    loop metadata) and that the body reaches. Compile units are not followed (they reach every
    subprogram through their globals). Returns the body with references renumbered and the new
    nodes, numbered from `first_id`."""
    reach: set[int] = set()
    edges: dict[int, list[int]] = {}  # node -> the nodes it references (compile units: none)
    todo = list(refs(body))
    while todo:
        n = todo.pop()
        if n in reach or n not in md:
            continue
        reach.add(n)
        if "!DICompileUnit(" in md[n]:
            continue
        edges[n] = refs(md[n])
        todo.extend(edges[n])
    # nodes among `reach` that lead to the subprogram: back from it along the references
    users: dict[int, list[int]] = {}
    for n, out in edges.items():
        for r in out:
            users.setdefault(r, []).append(n)
    leads: set[int] = {subprogram}
    todo = [subprogram]
    while todo:
        for n in users.get(todo.pop(), ()):
            if n not in leads:
                leads.add(n)
                todo.append(n)
    mapping = {n: first_id + i for i, n in enumerate(sorted(leads))}
    new: dict[int, str] = {}
    for n in sorted(leads):
        t = remap_refs(md[n], mapping)
        if n == subprogram and linkage_name is not None:
            if "linkageName:" in t:
                t = re.sub(r'linkageName: "[^"]*"', f'linkageName: "{linkage_name}"', t)
            else:
                t = t.replace("(name: ", f'(linkageName: "{linkage_name}", name: ', 1)
        new[mapping[n]] = t
    return remap_refs(body, mapping), new


def field(node: str, name: str) -> str | None:
    m = re.search(rf"\b{name}: (\"[^\"]*\"|![\d]+|[^,)]+)", node)
    return m.group(1).strip() if m else None


# attribute groups --------------------------------------------------------------------------------
def attr_groups(text: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in _ATTR_GROUP.finditer(text)}


def edit_attrs(attrs: str, drop: tuple[str, ...] = (), add: tuple[str, ...] = (),
               drop_prefix: tuple[str, ...] = ()) -> str:
    """An attribute list with words/keys dropped and added (`"key"="value"` pairs drop by
    key)."""
    items = re.findall(r'"[^"]*"(?:="[^"]*")?|\w+(?:\([^)]*\))?', attrs)
    out = []
    for it in items:
        key = it.split("=", 1)[0].strip('"') if it.startswith('"') else it.split("(", 1)[0]
        if key in drop or any(key.startswith(p) for p in drop_prefix):
            continue
        out.append(it)
    for a in add:
        if a not in out:
            out.append(a)
    return " ".join(out)


def declared(text: str) -> set[str]:
    """Names of the functions `text` declares or defines."""
    return {unquote(m.group(1)) for m in re.finditer(r"^(?:declare|define) [^\n]*?@(" + NAME
                                                     + r")\(", text, re.M)}
