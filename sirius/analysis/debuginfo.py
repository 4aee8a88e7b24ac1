"""Reading clang's `-g` metadata from IR text: source locations and variable names."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from sirius.diagnostics import Location

_MD_RE = re.compile(r"^!(\d+) = (?:distinct )?(!\w+)\((.*)\)\s*$", re.M)
_FIELD_RE = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|![\d]+|[^,]+)')


@dataclass
class DebugInfo:
    nodes: dict[int, tuple[str, dict[str, str]]]

    @classmethod
    def parse(cls, text: str) -> DebugInfo:
        nodes: dict[int, tuple[str, dict[str, str]]] = {}
        for m in _MD_RE.finditer(text):
            fields = {k: v.strip() for k, v in _FIELD_RE.findall(m.group(3))}
            nodes[int(m.group(1))] = (m.group(2), fields)
        return cls(nodes)

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
