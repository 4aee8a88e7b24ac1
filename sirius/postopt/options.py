"""A pass's options, read from its dataclass fields: their types, defaults, and the conversion of
an option's text in a pipeline string (`level=3`) to the field's type.

Supported field types: `bool` (`true`/`false`), `int`, `float`, `str`, `Literal[...]` of those,
and any of them `| None` (`none`). A pass with a field of another type is refused when it is
registered, so every option a user can name can be converted.
"""

from __future__ import annotations

import functools
import types
from dataclasses import MISSING, dataclass, fields
from typing import Literal, Union, get_args, get_origin, get_type_hints

from sirius.postopt.base import ModulePass, spell

__all__ = ["Option", "OptionValueError", "convert", "options_of", "type_text"]

_SCALARS = (bool, int, float, str)


class OptionValueError(ValueError):
    """An option's text that its type does not accept; the message says what it accepts."""


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a pass: its field name, type, and default (`required` when it has none)."""

    name: str
    type: object
    default: object = None
    required: bool = False

    def describe(self) -> str:
        """`level: one of 0, 1, 2, 3 (default 3)`."""
        tail = "required" if self.required else f"default {spell(self.default)}"
        return f"{self.name}: {type_text(self.type)} ({tail})"


@functools.cache
def options_of(cls: type[ModulePass]) -> tuple[Option, ...]:
    """The options of a pass class, in field order; TypeError for a type that cannot be read
    from a pipeline string (a bug in the pass, found when it is registered)."""
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):  # type: ignore[arg-type]
        tp = hints[f.name]
        if not _supported(tp):
            raise TypeError(f"pass {cls.name}: option {f.name} has type {tp}, which a pipeline "
                            "string cannot give (use bool, int, float, str, Literal or X | None)")
        if f.default is not MISSING:
            out.append(Option(f.name, tp, f.default))
        elif f.default_factory is not MISSING:
            out.append(Option(f.name, tp, f.default_factory()))
        else:
            out.append(Option(f.name, tp, required=True))
    return tuple(out)


def convert(text: str, tp: object, quoted: bool = False) -> object:
    """The value `text` denotes as a `tp` (`quoted`: it was written in double quotes, so it is
    a string, never `none`); OptionValueError saying what `tp` accepts."""
    if _is_optional(tp):
        if text == "none" and not quoted:
            return None
        (inner,) = [a for a in get_args(tp) if a is not type(None)]
        try:
            return convert(text, inner, quoted)
        except OptionValueError:
            raise OptionValueError(f"expected {type_text(tp)}") from None
    if get_origin(tp) is Literal:
        for choice in get_args(tp):
            if (choice == text) if isinstance(choice, str) else (spell(choice) == text):
                return choice
        raise OptionValueError(f"expected {type_text(tp)}")
    if tp is bool:
        if text in ("true", "false"):
            return text == "true"
    elif tp is int:
        try:
            return int(text, 10)
        except ValueError:
            pass
    elif tp is float:
        try:
            return float(text)
        except ValueError:
            pass
    elif tp is str:
        return text
    raise OptionValueError(f"expected {type_text(tp)}")


def type_text(tp: object) -> str:
    """What a user may write for a value of type `tp`."""
    if _is_optional(tp):
        (inner,) = [a for a in get_args(tp) if a is not type(None)]
        return f"{type_text(inner)}, or none"
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(spell(c) for c in get_args(tp))
    return {bool: "true or false", int: "an integer", float: "a number",
            str: "a string"}[tp]  # type: ignore[index]


def _is_optional(tp: object) -> bool:
    return (get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)
            and len(get_args(tp)) == 2)


def _supported(tp: object) -> bool:
    if _is_optional(tp):
        return all(_supported(a) for a in get_args(tp) if a is not type(None))
    if get_origin(tp) is Literal:
        return all(type(c) in _SCALARS for c in get_args(tp))
    return tp in _SCALARS
