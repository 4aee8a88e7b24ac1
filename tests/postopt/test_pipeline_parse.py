"""Pipeline strings and the pass registry (sirius/postopt/parse.py, options.py, registry.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sirius.postopt import (
    DEFAULT_PASSES,
    PASSES,
    LlvmOpt,
    ModulePass,
    PipelineError,
    default_passes,
    describe,
    format_pipeline,
    parse_pipeline,
)
from sirius.postopt.options import options_of
from sirius.postopt.registry import _check


@dataclass(frozen=True, slots=True)
class Demo(ModulePass):
    """A pass with one option of every supported type (tests only)."""

    name: ClassVar[str] = "demo-pass"
    flag: bool = False
    count: int = 1
    scale: float = 1.0
    label: str = "x"
    mode: Literal["fast", "exact"] = "fast"
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count must not be negative, not {self.count}")

    def run(self, module, ctx):
        return module.text


@dataclass(frozen=True, slots=True)
class NeedsTarget(ModulePass):
    name: ClassVar[str] = "needs-target"
    target: str

    def run(self, module, ctx):
        return module.text


REG = {"demo-pass": Demo, "needs-target": NeedsTarget, "llvm-opt": LlvmOpt}


def parse(text: str):
    return parse_pipeline(text, REG)


def error(text: str) -> PipelineError:
    with pytest.raises(PipelineError) as e:
        parse(text)
    return e.value


# reading --------------------------------------------------------------------------------------
def test_empty_pipeline_has_no_passes():
    assert parse("") == ()
    assert parse("   ") == ()


def test_options_take_their_field_types():
    (p,) = parse('demo-pass{flag=true, count=7, scale=0.5, label="a, {b}=\\"c\\"", mode=exact,'
                 ' limit=12}')
    assert p == Demo(flag=True, count=7, scale=0.5, label='a, {b}="c"', mode="exact", limit=12)
    assert type(p.count) is int and type(p.scale) is float and p.flag is True


def test_defaults_none_and_order():
    a, b, c = parse("demo-pass , llvm-opt{level=1}, demo-pass{limit=none}")
    assert a == Demo() and b == LlvmOpt(level=1, rounds=2) and c == Demo(limit=None)
    assert parse('demo-pass{label="none"}') == (Demo(label="none"),)


def test_default_pipeline_round_trips():
    text = format_pipeline(DEFAULT_PASSES)
    assert text == ("host-constants{max_clones=8},alias-facts,llvm-opt{level=3,rounds=2},"
                    "loop-fuse,contract,contract-shared{limit=16384,thread=free},"
                    "llvm-opt{level=3,rounds=1},"
                    "licm{threshold=1,small_trip=8}")
    assert parse_pipeline(text) == DEFAULT_PASSES


def test_default_passes_by_level():
    assert default_passes(3) is DEFAULT_PASSES
    assert default_passes(0) == (LlvmOpt(level=0, rounds=1),)
    assert default_passes(2) == (LlvmOpt(level=2, rounds=2),)
    with pytest.raises(ValueError, match="optimization level 4"):
        default_passes(4)


_labels = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
_demos = st.builds(Demo, flag=st.booleans(), count=st.integers(0, 10**6),
                   scale=st.floats(allow_nan=False, allow_infinity=False, width=32),
                   label=_labels, mode=st.sampled_from(["fast", "exact"]),
                   limit=st.none() | st.integers(-5, 5))


@settings(deadline=None)
@given(st.lists(_demos, max_size=3))
def test_format_then_parse_is_identity(passes):
    assert parse(format_pipeline(passes)) == tuple(passes)


# errors: each says what would have been valid -------------------------------------------------
def test_unknown_pass_lists_the_passes_and_suggests():
    e = error("llvm-opt,llvm-o3")
    assert "unknown pass 'llvm-o3'; did you mean llvm-opt?" in e.message
    assert e.col == 9
    assert e.notes == ("passes: demo-pass, llvm-opt, needs-target",)
    assert e.render().splitlines()[1:3] == ["    llvm-opt,llvm-o3", "             ^"]


def test_unknown_option_lists_the_options():
    e = error("demo-pass{colour=red}")
    assert e.message == "pass demo-pass has no option 'colour'"
    assert e.col == len("demo-pass{")
    (note,) = e.notes
    for want in ("flag: true or false (default false)", "count: an integer (default 1)",
                 "scale: a number (default 1.0)", 'label: a string (default x)',
                 "mode: one of fast, exact (default fast)",
                 "limit: an integer, or none (default none)"):
        assert want in note


@pytest.mark.parametrize("text, expected", [
    ("demo-pass{flag=yes}", "expected true or false"),
    ("demo-pass{count=1.5}", "expected an integer"),
    ("demo-pass{scale=fast}", "expected a number"),
    ("demo-pass{mode=slow}", "expected one of fast, exact"),
    ("demo-pass{limit=many}", "expected an integer, or none"),
    ("llvm-opt{level=4}", "expected one of 0, 1, 2, 3"),
])
def test_bad_values_name_the_type(text, expected):
    e = error(text)
    assert "bad value" in e.message and e.message.endswith(expected)
    assert e.col == text.index("=") + 1


def test_the_pass_check_of_its_options_becomes_a_pipeline_error():
    e = error("demo-pass{count=-1}")
    assert e.message == "demo-pass: count must not be negative, not -1"
    assert error("llvm-opt{rounds=0}").message == \
        "llvm-opt: rounds must be between 1 and 8, not 0"


@pytest.mark.parametrize("text, message", [
    ("demo-pass{count=1,count=2}", "option count is given twice"),
    ("demo-pass{count=1", "expected '}' to close the options of demo-pass"),
    ("demo-pass{count 1}", "expected '=' after option count"),
    ("demo-pass{count=}", "expected a value for option count"),
    ("demo-pass{count=1 flag=true}", "expected ',' or '}' after an option"),
    ('demo-pass{label="abc}', "unterminated string"),
    ("demo-pass,", "expected a pass name"),
    ("demo-pass llvm-opt", "expected ',' or the end of the pipeline"),
    ("needs-target", "pass needs-target needs option target"),
])
def test_syntax_errors(text, message):
    assert error(text).message == message


# the registry -----------------------------------------------------------------------------------
def test_registry_holds_every_pass_as_a_frozen_slotted_dataclass():
    assert "llvm-opt" in PASSES
    for name, cls in PASSES.items():
        assert cls.name == name
        assert cls.__dataclass_params__.frozen and "__slots__" in cls.__dict__
        options_of(cls)
        d = describe(cls)
        assert d["name"] == name and d["summary"]
        assert parse_pipeline(str(cls())) == (cls(),)  # every option has a default


def test_registry_refuses_malformed_passes():
    @dataclass(frozen=True, slots=True)
    class BadType(ModulePass):
        name: ClassVar[str] = "bad-type"
        sizes: list[int] | None = None

        def run(self, module, ctx):
            return module.text

    @dataclass(slots=True)
    class Mutable(ModulePass):
        name: ClassVar[str] = "mutable"

        def run(self, module, ctx):
            return module.text

    @dataclass(frozen=True, slots=True)
    class Camel(ModulePass):
        name: ClassVar[str] = "CamelCase"

        def run(self, module, ctx):
            return module.text

    with pytest.raises(TypeError, match="option sizes has type"):
        _check((BadType,))
    with pytest.raises(TypeError, match="not a frozen dataclass"):
        _check((Mutable,))
    with pytest.raises(TypeError, match="no kebab-case name"):
        _check((Camel,))
    with pytest.raises(TypeError, match="two passes are named demo-pass"):
        _check((Demo, Demo))
    assert dict(_check((Demo, LlvmOpt))) == {"demo-pass": Demo, "llvm-opt": LlvmOpt}
