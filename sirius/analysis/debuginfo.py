"""Reading clang's `-g` metadata from IR text: source locations and variable names."""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sirius.diagnostics import Location

_FIELD_RE = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|![\d]+|[^,]+)')


# the last modules' debug information, by the text of their metadata (a pass that changes
# instructions and not metadata leaves it the same); shared: read, never changed
_PARSED: OrderedDict[str, DebugInfo] = OrderedDict()


class _Nodes(Mapping[int, tuple[str, dict[str, str]]]):
    """The metadata nodes by number, each node's fields parsed when it is first read (a view
    of a big module reads the nodes of a few locations and names, not the thousands there)."""

    def __init__(self, raw: dict[int, tuple[str, str]]) -> None:
        self.raw = raw
        self.parsed: dict[int, tuple[str, dict[str, str]]] = {}

    def __getitem__(self, node: int) -> tuple[str, dict[str, str]]:
        got = self.parsed.get(node)
        if got is None:
            kind, body = self.raw[node]
            got = self.parsed[node] = (kind, {k: v.strip() for k, v in _FIELD_RE.findall(body)})
        return got

    def __contains__(self, node: object) -> bool:
        return node in self.raw

    def __iter__(self) -> Iterator[int]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def of_kind(self, kind: str) -> Iterator[tuple[int, dict[str, str]]]:
        """The nodes of one kind (`!DILocalVariable`), parsed, with their numbers."""
        for node, (k, _) in self.raw.items():
            if k == kind:
                yield node, self[node][1]


@dataclass
class DebugInfo:
    nodes: _Nodes

    @classmethod
    def parse(cls, text: str) -> DebugInfo:
        # the nodes are the lines `!N = [distinct ]!Kind(...)`, after every function: split
        # the lines from the first of them (a regular expression over the whole text of a big
        # module took a third of its view's time), and read each node's kind and fields
        # when it is first asked for
        start = text.find("\n!")
        part = text[start + 1:] if start >= 0 else ""
        got = _PARSED.get(part)
        if got is not None:  # the metadata of a module viewed before (before a pass ran)
            _PARSED.move_to_end(part)
            return got
        raw: dict[int, tuple[str, str]] = {}
        for line in part.split("\n"):
            num, eq, rest = line.partition(" = ")
            if not eq or not num[1:].isdigit() or num[0] != "!":
                continue
            if rest.startswith("distinct "):
                rest = rest[9:]
            paren = rest.find("(")
            if paren > 1 and rest[0] == "!" and rest[1:paren].isidentifier() and \
                    rest.endswith(")"):
                raw[int(num[1:])] = (rest[:paren], rest[paren + 1:-1])
        got = _PARSED[part] = cls(_Nodes(raw))
        while len(_PARSED) > 4:
            _PARSED.popitem(last=False)
        return got

    def _ref(self, value: str | None) -> int | None:
        if value and value.startswith("!") and value[1:].isdigit():
            return int(value[1:])
        return None

    def field(self, node: int | None, name: str) -> str | None:
        if node is None or node not in self.nodes:
            return None
        return self.nodes[node][1].get(name)

    def string(self, node: int | None, name: str) -> str | None:
        v = self.field(node, name)
        return v[1:-1] if v and v.startswith('"') else None

    def file_of(self, scope: int | None) -> str | None:
        seen = 0
        while scope is not None and seen < 64:
            kind, fields = self.nodes.get(scope, ("", {}))
            if kind == "!DIFile":
                name = self.string(scope, "filename") or ""
                directory = self.string(scope, "directory") or ""
                return os.path.normpath(os.path.join(directory, name)) if directory else name
            f = self._ref(fields.get("file"))
            if f is not None:
                return self.file_of(f)
            scope = self._ref(fields.get("scope"))
            seen += 1
        return None

    def location(self, node: int | None) -> Location | None:
        """The source location of a `!dbg` node, in the user's code.

        An instruction inlined from a header (cudaMalloc<T>, dim3's constructor, a launch stub)
        is reported at the call site in the user's file, found through the `inlinedAt` chain.
        """
        first: Location | None = None
        seen = 0
        while node is not None and node in self.nodes and seen < 64:
            kind, fields = self.nodes[node]
            if kind != "!DILocation":
                break
            file = self.file_of(self._ref(fields.get("scope"))) or "<unknown>"
            line = int(fields.get("line", "0"))
            if line > 0:
                loc = Location(_relative(file), line, int(fields.get("column", "0")))
                if not _is_system(file):
                    return loc
                first = first or loc
            node = self._ref(fields.get("inlinedAt"))
            seen += 1
        return first

    def function_name(self, node: int | None) -> str | None:
        """The source function a `!dbg` location is in (the innermost one in the user's code,
        so code inlined from a helper is named by the helper)."""
        seen = 0
        while node is not None and node in self.nodes and seen < 64:
            kind, fields = self.nodes[node]
            if kind != "!DILocation":
                return None
            scope, name = self._ref(fields.get("scope")), None
            for _ in range(64):
                if scope is None or self.nodes.get(scope, ("",))[0] == "!DISubprogram":
                    name = self.string(scope, "name")
                    break
                scope = self._ref(self.nodes.get(scope, ("", {}))[1].get("scope"))
            if not _is_system(self.file_of(self._ref(fields.get("scope"))) or ""):
                return name
            node = self._ref(fields.get("inlinedAt"))
            seen += 1
        return None

    def var_name(self, node: int) -> str | None:
        if self.nodes.get(node, ("",))[0] != "!DILocalVariable":
            return None
        return self.string(node, "name")

    def subprogram_location(self, node: int | None) -> Location | None:
        if node is None or node not in self.nodes:
            return None
        line = self.field(node, "line")
        file = self.file_of(node)
        if line is None or file is None:
            return None
        return Location(_relative(file), int(line))


_SYSTEM_PREFIXES = ("/usr/include", "/usr/lib/", "/usr/local/cuda")


def _is_system(path: str) -> bool:
    cuda = os.environ.get("CUDA_HOME")
    prefixes = _SYSTEM_PREFIXES + ((cuda,) if cuda else ())
    return path.startswith(prefixes) or "/sirius/include/" in path


def _relative(path: str) -> str:
    """Paths under the working directory are shown relative to it, as clang shows them."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path
