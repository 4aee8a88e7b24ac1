"""Float ceil of integer quotients and programs sized from argv (sirius/analysis/host/floats.py,
sirius/analysis/host/argv.py). Expected grids are integer ceil divisions computed here in
Python, independently of the float evaluation under test; expected outputs come from numpy."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from sirius.analysis.expr import Expr
from sirius.analysis.host.argv import parse_float, parse_int
from sirius.analysis.host.floats import float_binary, float_call, from_float, to_float
from sirius.analysis.host.values import Flt, FltInt, Int, Unknown, const
from sirius.analysis.program import analyse
from sirius.fusion.report import plan_json, report_md
from sirius.pipeline import fuse
from sirius.runtime.interpreter import run_program
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

PROGRAMS = ROOT / "tests" / "fusion" / "argv_programs"
CHAIN = PROGRAMS / "argv_chain.cu"
LOOP = PROGRAMS / "ceil_loop.cu"


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


# ceil((float)n / b) in a host loop ---------------------------------------------------------------

def test_ceil_grid_in_a_loop_is_modelled():
    _, _, host = analyse([LOOP])
    [loop] = [op for op in host.ops if hasattr(op, "body")]
    first, second = loop.body
    for t in range(1, 5):
        n = 1000 * t - 3
        assert first.grid[0].evaluate({"t": t}) == ceil_div(n, 96)
        assert second.grid[0].evaluate({"t": t}) == ceil_div(n, 128)
        assert first.args[2].value.evaluate({"t": t}) == n


def test_ceil_grid_in_a_loop_runs_every_element():
    res = run_program([LOOP], seed=1)
    x = res.initial["dx"].view(np.float32)
    for out in ("dy", "dz"):
        y = res.final[out].view(np.float32)
        assert np.array_equal(y[:3997], 2 * x[:3997])  # the last iteration's n = 3997
        assert not y[3997:].any()  # never written (memset 0)
    assert len(res.launches) == 8


def test_ceil_of_an_inexact_conversion_is_refused_with_the_line():
    p = run_cli("inspect", str(LOOP), "-DSTEP=5000000")
    assert p.returncode == 2
    assert "ceil_loop.cu:35" in p.stderr and ">= 2^24" in p.stderr and "Traceback" not in p.stderr


def test_float_rules():
    r: dict[str, tuple[int, int]] = {"t": (1, 4)}
    n = Expr.var("t").scale(1000) + (-3)
    # a constant is converted and divided as the hardware does: 2^24 + 1 is not a float
    assert to_float("sitofp", const(16777217, 32), "i32", "float", r) == Flt(16777216.0)
    assert to_float("sitofp", const(16777217, 32), "i32", "double", r) == Flt(16777217.0)
    assert float_binary("fdiv", Flt(1.0), Flt(3.0), "float", r).v == np.float32(1) / np.float32(3)
    assert float_call("llvm.ceil.f32", [Flt(2.5)], r) == Flt(3.0)
    # a loop-dependent integer: exact, and ceil/floor/trunc become integer divisions
    q = float_binary("fdiv", to_float("sitofp", Int(n, 32), "i32", "float", r), Flt(96.0),
                     "float", r)
    assert q == FltInt(n, 24, 96)
    for fn, ref in (("ceil", ceil_div), ("floor", lambda a, b: a // b)):
        e = from_float("fptoui", float_call(f"llvm.{fn}.f32", [q], r), "i32", r)
        assert [e.e.evaluate({"t": t}) for t in range(1, 5)] == \
            [ref(1000 * t - 3, 96) for t in range(1, 5)]
    # a negative dividend divided by a negative constant, then floored
    neg = float_binary("fdiv", FltInt(-n, 24), Flt(-7.0), "float", r)
    assert from_float("fptosi", float_call("floorf", [neg], r), "i32", r).e.evaluate(
        {"t": 2}) == (2 * 1000 - 3) // 7
    # refused: the range is too wide for float, or not known at all, or not an integer divisor
    wide = Int(Expr.var("t").scale(5_000_000), 32)
    assert isinstance(to_float("sitofp", wide, "i32", "float", r), Unknown)
    assert isinstance(to_float("sitofp", wide, "i32", "double", r), FltInt)
    assert isinstance(to_float("sitofp", Int(Expr.var("u"), 32), "i32", "float", r), Unknown)
    assert isinstance(float_binary("fdiv", FltInt(n, 24), Flt(2.5), "float", r), Unknown)


# argv --------------------------------------------------------------------------------------------

def test_c_string_to_number_rules():
    assert parse_int("  -12abc", 10) == (-12, 5)
    assert parse_int("0x1f", 0) == (31, 4)
    assert parse_int("010", 0) == (8, 3)
    assert parse_int("abc", 10) == (0, 0)
    assert parse_float("2.5e1x") == (25.0, 5)
    assert parse_float(" .5") == (0.5, 3)
    assert parse_float("0x1p-2") == (0.25, 6)


@functools.cache
def chain_fused(args: str):
    return fuse([CHAIN], argv=tuple(args.split()))


def test_argv_sized_program_is_specialised_fused_and_verified():
    res = chain_fused("1000 2.5")
    host = res.original.host
    assert host.argv == ("1000", "2.5")
    assert [b.bytes for b in host.buffers] == [4000, 4000]
    first = host.launches()[0]
    assert first.grid[0].const == ceil_div(1000, 96)
    assert first.args[2].value == 2.5
    assert (res.launches_before, res.launches_after) == (2, 1)
    rep = verify_fused(res.original, res, seed=2, orders=("forward", "reverse"))
    # not bitwise: in one kernel LLVM contracts a * x + 1 into an fma (docs/verify.md)
    assert rep.ok, rep.render()
    assert plan_json(res)["argv"] == ["1000", "2.5"]
    assert "program arguments (--args): '1000 2.5'" in report_md(res)


def test_run_uses_the_same_arguments():
    res = run_program([CHAIN], seed=4, argv=("777", "-1.5"))
    assert res.program.argv == ("777", "-1.5")
    x = res.initial["dx"].view(np.float32)
    y = res.final["dy"].view(np.float32)
    assert x.size == y.size == 777
    assert np.array_equal(y, np.float32(-1.5) * x + np.float32(1.0))


@pytest.mark.parametrize("args,code", [(None, 2), ("1000 2.5", 0)])
def test_verify_cli_with_and_without_args(args: str | None, code: int):
    extra = ["--args", args] if args else []
    p = run_cli("verify", str(CHAIN), "-q", "-j", "1", "--order", "forward", *extra)
    assert p.returncode == code, p.stderr
    if args is None:
        assert "argv_chain.cu:21" in p.stderr and "--args" in p.stderr
        assert "Traceback" not in p.stderr
    else:
        assert "launches: 2 -> 1" in p.stdout and "OK" in p.stdout
