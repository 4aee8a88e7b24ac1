"""Pipeline strings: `llvm-opt{level=2,rounds=1},other-pass` <-> a tuple of pass objects.

    pipeline := [pass (',' pass)*]
    pass     := NAME ['{' [option (',' option)*] '}']
    option   := NAME '=' VALUE       VALUE: a bare word (no space , { } = ") or "a \\"quoted\\" one"

Each option's text is converted to the type of the pass's dataclass field
(`sirius.postopt.options`). Every error is a `PipelineError` that shows the pipeline with a
caret under the offending part and lists what would have been valid: the registered passes, the
pass's options, or the values the option accepts.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence

from sirius.postopt.base import ModulePass, PassError
from sirius.postopt.options import OptionValueError, convert, options_of
from sirius.postopt.registry import PASSES

__all__ = ["PipelineError", "format_pipeline", "parse_pipeline"]

_NAME = re.compile(r"[A-Za-z_][-\w]*")
_BARE = re.compile(r'[^\s,{}="]+')


class PipelineError(PassError):
    """A pipeline string that names no registered pass, an unknown option, or a bad value."""

    def __init__(self, message: str, text: str, col: int, notes: tuple[str, ...] = ()):
        super().__init__(message, None, notes)
        self.text, self.col = text, col

    def render(self) -> str:
        out = [f"{self.kind}: {self.message}", f"    {self.text}",
               "    " + " " * self.col + "^"]
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out)


def parse_pipeline(text: str, registry: Mapping[str, type[ModulePass]] | None = None
                   ) -> tuple[ModulePass, ...]:
    """The passes a pipeline string names, in order (`""`: none)."""
    return _Reader(text, PASSES if registry is None else registry).pipeline()


def format_pipeline(passes: Iterable[ModulePass]) -> str:
    """The pipeline string of `passes`; `parse_pipeline` reads it back to equal passes."""
    return ",".join(str(p) for p in passes)


class _Reader:
    def __init__(self, text: str, registry: Mapping[str, type[ModulePass]]):
        self.text, self.registry, self.i = text, registry, 0

    def error(self, message: str, col: int, notes: Sequence[str] = ()) -> PipelineError:
        return PipelineError(message, self.text, col, tuple(notes))

    def skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def at(self, ch: str) -> bool:
        self.skip()
        if self.text.startswith(ch, self.i):
            self.i += len(ch)
            return True
        return False

    def name(self, what: str) -> tuple[str, int]:
        self.skip()
        m = _NAME.match(self.text, self.i)
        if m is None:
            raise self.error(f"expected {what}", self.i)
        self.i = m.end()
        return m.group(), m.start()

    def pipeline(self) -> tuple[ModulePass, ...]:
        self.skip()
        if self.i == len(self.text):
            return ()
        passes = [self.one_pass()]
        while self.at(","):
            passes.append(self.one_pass())
        self.skip()
        if self.i < len(self.text):
            raise self.error("expected ',' or the end of the pipeline", self.i)
        return tuple(passes)

    def one_pass(self) -> ModulePass:
        name, col = self.name("a pass name")
        cls = self.registry.get(name)
        if cls is None:
            close = difflib.get_close_matches(name, list(self.registry), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise self.error(f"unknown pass '{name}'{hint}", col,
                             [f"passes: {', '.join(sorted(self.registry)) or '(none)'}"])
        opts = {o.name: o for o in options_of(cls)}
        valid = [f"{o.describe()}" for o in opts.values()] or ["(it has no options)"]
        values: dict[str, object] = {}
        if self.at("{"):
            while not self.at("}"):
                if self.i == len(self.text):
                    raise self.error(f"expected '}}' to close the options of {name}", self.i)
                if values and not self.at(","):
                    raise self.error("expected ',' or '}' after an option", self.i)
                key, kcol = self.name(f"an option of {name}")
                if key not in opts:
                    raise self.error(f"pass {name} has no option '{key}'", kcol,
                                     [f"options of {name}: {'; '.join(valid)}"])
                if key in values:
                    raise self.error(f"option {key} is given twice", kcol)
                if not self.at("="):
                    raise self.error(f"expected '=' after option {key}", self.i)
                raw, quoted, vcol = self.value(key)
                try:
                    values[key] = convert(raw, opts[key].type, quoted)
                except OptionValueError as e:
                    raise self.error(f"{name}: bad value '{raw}' for option {key}: {e}",
                                     vcol) from None
        missing = [k for k, o in opts.items() if o.required and k not in values]
        if missing:
            raise self.error(f"pass {name} needs option {', '.join(missing)}", col,
                             [f"options of {name}: {'; '.join(valid)}"])
        try:
            return cls(**values)
        except (ValueError, TypeError) as e:  # the pass's own check of its options
            raise self.error(f"{name}: {e}", col,
                             [f"options of {name}: {'; '.join(valid)}"]) from None

    def value(self, key: str) -> tuple[str, bool, int]:
        self.skip()
        col = self.i
        if self.text.startswith('"', col):
            out, i = [], col + 1
            while i < len(self.text) and self.text[i] != '"':
                if self.text[i] == "\\" and i + 1 < len(self.text):
                    i += 1
                out.append(self.text[i])
                i += 1
            if i == len(self.text):
                raise self.error("unterminated string", col)
            self.i = i + 1
            return "".join(out), True, col
        m = _BARE.match(self.text, col)
        if m is None:
            raise self.error(f"expected a value for option {key}", col)
        self.i = m.end()
        return m.group(), False, col
