"""Errors and warnings a user can act on.

Every error carries a source location (file:line[:col], from clang's -g debug info) where one is
known. The CLI prints errors without a traceback and exits with status 2.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Location:
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + (f":{self.col}" if self.col else "")

    def source_line(self) -> str | None:
        """The text of the line, when the file is readable."""
        try:
            lines = Path(self.file).read_text(errors="replace").splitlines()
        except OSError:
            return None
        if 1 <= self.line <= len(lines):
            return lines[self.line - 1]
        return None


class SiriusError(Exception):
    """Base of every error sirius reports to a user (exit status 2)."""

    kind = "error"

    def __init__(self, message: str, loc: Location | None = None, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = notes

    def render(self) -> str:
        head = f"{self.loc}: " if self.loc else ""
        out = [f"{head}{self.kind}: {self.message}"]
        if self.loc is not None:
            text = self.loc.source_line()
            if text is not None:
                out.append(f"    {text.rstrip()}")
                if self.loc.col:
                    out.append("    " + " " * (self.loc.col - 1) + "^")
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


class ToolchainError(SiriusError):
    """clang or the CUDA toolkit is missing or unusable."""


class FrontendError(SiriusError):
    """clang rejected the program; `diagnostics` holds its messages (file:line:col)."""

    def __init__(self, message: str, loc: Location | None = None, diagnostics: str = "",
                 notes: tuple[str, ...] = ()):
        super().__init__(message, loc, notes)
        self.diagnostics = diagnostics

    def render(self) -> str:
        text = super().render()
        if self.diagnostics:
            text += "\n" + self.diagnostics.rstrip()
        return text


class HostAnalysisError(SiriusError):
    """The host code does something the host model cannot represent faithfully."""


_silenced: set[str] = set()


def silence(warning_id: str) -> None:
    _silenced.add(warning_id)


def warn(warning_id: str, message: str, loc: Location | None = None) -> None:
    """Print a warning with an id (`-W no-ID` silences it)."""
    if warning_id in _silenced:
        return
    head = f"{loc}: " if loc else ""
    print(f"{head}warning: {message} [{warning_id}]", file=sys.stderr)
