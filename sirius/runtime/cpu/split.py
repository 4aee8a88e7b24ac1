"""Cutting the executor's rewritten module into parts that LLVM optimizes and compiles apart.

A paper-shape fused module takes about a minute to optimize and compile on one core (LLVM's O2
and code generation of paper lstm_large's bounds-checked module: 29 s and 28 s), while a verify's
other workers wait for it. Cut into parts, it compiles on every core (`jit.py`), and MCJIT loads
the parts' objects into one engine, where they resolve each other's symbols.

How the module is cut (from its printed text, one top-level entity per line except functions):
- a function with external linkage (kernels, their thread and block entries) goes to one part,
  together with every external function it references, directly or through local functions:
  a cluster. Clusters are dealt to the parts largest first, each to the part with the least
  text so far;
- a local function (internal, private, linkonce, weak: helpers, `__sirius_access`) is copied
  into every part that calls it, made internal there, so it is still inlined everywhere;
- every global variable is defined in part 0 (a local one made external, its name kept; names
  are unique in a module) and declared in the others, so each exists once in the engine;
  a global's initializer that names a function puts that function's cluster in part 0;
- declarations, types, attribute groups and metadata are copied into every part.

A module this does not know how to cut (an alias, module asm, metadata naming a global, an
unnamed global, fewer than two clusters) is returned whole; one whose parts do not compile is
compiled whole by jit.py.
"""

from __future__ import annotations

import re

from sirius.analysis.irlex import NAME, Unsupported, read_type

_LOCAL = ("internal", "private", "linkonce", "linkonce_odr", "weak", "weak_odr",
          "available_externally")
_DEFINE_NAME_RE = re.compile(r"@(" + NAME + r")\(")
_GLOBAL_RE = re.compile(r"@(" + NAME + r") = (.*)$")
_REF_RE = re.compile(r"@(" + NAME + r")")
_COMDAT_RE = re.compile(r" comdat(?:\(\$" + NAME + r"\))?")
# words that may stand between `@g =` and `global`/`constant` and that a declaration drops
_DROPPED = {"private", "internal", "linkonce", "linkonce_odr", "weak", "weak_odr", "common",
            "available_externally", "unnamed_addr", "local_unnamed_addr", "dso_local",
            "dso_preemptable", "hidden", "protected", "default"}


class _Module:
    """The top-level entities of a printed module."""

    def __init__(self, text: str):
        self.head: list[str] = []  # source_filename, target lines, types, comdats
        self.globals: dict[str, str] = {}  # name -> its line
        self.declares: list[str] = []
        self.defines: dict[str, list[str]] = {}  # name -> its lines, in order
        self.tail: list[str] = []  # attribute groups and metadata
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("define "):
                m = _DEFINE_NAME_RE.search(line)
                if m is None:
                    raise Unsupported(f"a function header without a name: {line[:80]}")
                j = i
                while lines[j] != "}":
                    j += 1
                self.defines[m.group(1)] = lines[i:j + 1]
                i = j + 1
                continue
            if line.startswith("@"):
                m = _GLOBAL_RE.match(line)
                if m is None or re.search(r"\b(?:alias|ifunc)\b", m.group(2).split("(")[0]):
                    raise Unsupported(f"a global this splitter does not know: {line[:80]}")
                self.globals[m.group(1)] = line
            elif line.startswith("declare "):
                self.declares.append(line)
            elif line.startswith(("attributes ", "!")):
                if "@" in line and line.startswith("!"):
                    raise Unsupported("metadata that names a global")
                self.tail.append(line)
            elif line.startswith(("source_filename", "target ", "%", "$")):
                self.head.append(line)
            elif line.startswith("module asm"):
                raise Unsupported("module asm")
            elif line and not line.startswith(";"):
                raise Unsupported(f"a top-level line this splitter does not know: {line[:80]}")
            i += 1

        if any(n.isdigit() for n in (*self.globals, *self.defines)):
            raise Unsupported("an unnamed global or function (numbered in each module)")

    def is_local(self, name: str) -> bool:
        words = self.defines[name][0].split()
        return len(words) > 1 and words[1] in _LOCAL


def _refs(lines: list[str] | str) -> set[str]:
    text = lines if isinstance(lines, str) else "\n".join(lines)
    return {m.group(1) for m in _REF_RE.finditer(text)}


def _declaration(line: str) -> str:
    """`@g = external ... global T` for the definition `line` of a global variable."""
    m = _GLOBAL_RE.match(line)
    assert m is not None
    rest = m.group(2)
    words: list[str] = []
    i = 0
    while True:
        w = re.match(r"\s*([\w.]+(?:\([^)]*\))?)", rest[i:])
        if w is None:
            raise Unsupported(f"no global/constant keyword in {line[:80]}")
        i += w.end()
        word = w.group(1)
        if word in ("global", "constant"):
            break
        if word not in _DROPPED:
            words.append(word)
    i += 1  # the space before the type
    ty = rest[i:read_type(rest, i)]
    return " ".join([f"@{m.group(1)} = external", *words, word, ty])


def _external(line: str) -> str:
    """A global variable's definition with local linkage made external."""
    m = _GLOBAL_RE.match(line)
    assert m is not None
    rest = re.sub(r"^(?:private|internal) ", "", m.group(2))
    return f"@{m.group(1)} = {rest}"


def _internal(header: str) -> str:
    """A local function's header, internal and in no comdat (it is copied into several parts)."""
    words = header.split(" ", 2)
    if words[1] in _LOCAL and words[1] not in ("internal", "private"):
        header = f"define internal {words[2]}"
    return _COMDAT_RE.sub("", header)


def split(text: str, parts: int) -> list[str]:
    """`text` (a printed module) as at most `parts` module texts that together define what it
    defines, or `[text]` where it cannot or need not be cut."""
    if parts < 2:
        return [text]
    try:
        mod = _Module(text)
    except Unsupported:
        return [text]
    refs = {name: _refs(lines) for name, lines in mod.defines.items()}
    local = {name for name in mod.defines if mod.is_local(name)}

    def local_closure(roots: set[str]) -> set[str]:
        todo, seen = list(roots), set(roots)
        while todo:
            for r in refs[todo.pop()]:
                if r in local and r not in seen:
                    seen.add(r)
                    todo.append(r)
        return seen

    # clusters: external functions joined by references (directly or through local ones)
    parent = {name: name for name in mod.defines if name not in local}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    reach = {}
    for root in parent:
        reach[root] = local_closure({root})
        for name in set().union(*(refs[f] for f in reach[root])):
            if name in parent:
                parent[find(name)] = find(root)
    anchored = set()  # clusters that a global variable's initializer names
    init_refs = set().union(*(_refs(line) for line in mod.globals.values())) \
        if mod.globals else set()
    for name in init_refs:
        if name in parent:
            anchored.add(find(name))
    clusters: dict[str, list[str]] = {}
    for root in parent:
        clusters.setdefault(find(root), []).append(root)
    if len(clusters) < 2:
        return [text]

    size = {c: sum(len(line) for f in local_closure(set(members)) for line in mod.defines[f])
            for c, members in clusters.items()}  # text the cluster's part compiles
    load = [0] * parts
    where: list[list[str]] = [[] for _ in range(parts)]
    for c in sorted(clusters, key=lambda c: (c not in anchored, -size[c])):
        k = 0 if c in anchored else min(range(parts), key=lambda p: load[p])
        load[k] += size[c]
        where[k] += clusters[c]
    where = [w for w in where if w]  # part 0 is never empty: it takes the first cluster
    if len(where) < 2:
        return [text]

    init_locals = local_closure({n for n in init_refs if n in local})
    decls = {name: _declaration(line) for name, line in mod.globals.items()
             if not name.startswith("llvm.")}
    out = []
    for k, roots in enumerate(where):
        funcs = local_closure(set(roots)) | (init_locals if k == 0 else set())
        body: list[str] = list(mod.head)
        if k == 0:
            body += [_external(line) for line in mod.globals.values()]
        else:
            body += decls.values()
        body += mod.declares
        for name, lines in mod.defines.items():
            if name in funcs:
                body.append(_internal(lines[0]) if name in local else lines[0])
                body += lines[1:]
        body += mod.tail
        out.append("\n".join(body) + "\n")
    return out
