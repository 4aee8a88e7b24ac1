"""Copies to and from `__constant__` and `__device__` variables through the dependence
analysis, fusion and verification (issue 16 item 5). The programs are in symbol_programs/;
expected values are computed with numpy from the host data the executor seeded (the bytes the
copies send), not from the fused run itself."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest

from sirius.analysis.host.model import Copy, Launch
from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options
from sirius.fusion.report import report_md
from sirius.pipeline import fuse
from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.interpreter import RunResult, buffer_dtypes, run_host_program
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

PROGRAMS = ROOT / "tests" / "fusion" / "symbol_programs"
F32 = np.float32


@functools.cache
def fused(name: str) -> FuseResult:
    return fuse([PROGRAMS / name], Options())


@dataclass(frozen=True)
class _Fused:
    device_ir: str
    device_module: object
    files: tuple


def run_fused(res: FuseResult, order: str = "forward") -> RunResult:
    import llvmlite.binding as llvm

    prog = _Fused(res.device_ir, llvm.parse_assembly(res.device_ir), res.original.program.files)
    # typed as the original's buffers, as verify does (the fused kernels' parameters differ)
    dtypes = buffer_dtypes(res.original.host, {k.mangled: k for k in res.kernels})
    return run_host_program(res.host, prog, res.kernels, CpuDevice(order=order, jobs=1),
                            order=order, dtypes=dtypes)


def deps_on(res: FuseResult, buffer: str) -> set[tuple[str, str, str]]:
    return {(d.src, d.dst, d.kind) for d in res.uar.dependences if d.buffer == buffer}


# a table filled before every launch: an input, and the launches fuse --------------------------

def test_constant_table_filled_before_the_launches_is_an_input_and_they_fuse():
    res = fused("table_fuse.cu")
    assert (res.launches_before, res.launches_after) == (3, 1)
    (rec,) = res.fused
    assert [n.launch.kernel for n in rec.nodes] == ["scale", "shift", "combine"]
    # S0 writes coef, every launch reads it; the copy back reads what combine wrote
    # (S0 copy to coef, S1 copy to x, S2 scale, S3 shift, S4 combine, S5 copy from result)
    assert [st.label for st in res.uar.statements] == \
        ["copy H2D", "copy H2D", "scale", "shift", "combine", "copy D2H"]
    assert deps_on(res, "@coef") == {("S0", "S2", "RAW"), ("S0", "S3", "RAW"),
                                     ("S0", "S4", "RAW")}
    assert deps_on(res, "@result") == {("S4", "S5", "RAW")}
    # the fused host program: the table in, the fused launch, the results out
    kinds = [(op.kind, getattr(op.dst, "buffer", None), getattr(op.src, "buffer", None))
             for op in res.host.ops if isinstance(op, Copy)]
    assert kinds == [("H2D", "@coef", None), ("H2D", "x", None), ("D2H", None, "@result")]


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_fused_table_program_computes_the_numpy_values(order):
    r = run_fused(fused("table_fuse.cu"), order)
    coef = r.host["hc"][:32].view(F32)
    x = r.initial["x"]
    i = np.arange(x.size)
    z = x * coef[i % 8] + coef[(i + 3) % 8]
    want = z * x - coef[0]
    # clang may contract a * b + c into one fused multiply-add: float32 rounding apart
    np.testing.assert_allclose(r.final["@result"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r.host["_ZZ4mainE2hr"].view(F32), want, rtol=1e-5, atol=1e-6)
    assert r.final["@coef"].tobytes() == coef.tobytes()


def test_fused_table_program_verifies_comparing_the_device_result():
    res = fused("table_fuse.cu")
    rep = verify_fused(res.original, res, seed=3, orders=("forward", "reverse"))
    assert rep.ok, rep.render()
    assert rep.outputs == ("@result",)
    assert all(r.buffer == "@result" and r.elements == 4096 for r in rep.rows)


def test_cli_fuse_and_verify_of_the_table_program(tmp_path):
    src = str(PROGRAMS / "table_fuse.cu")
    r = run_cli("fuse", src, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert "launches: 3 -> 1" in r.stdout
    r = run_cli("verify", src)
    assert r.returncode == 0, r.stderr
    assert "verdict: OK" in r.stdout and "@result" in r.stdout


# a copy between two launches that read the table ------------------------------------------------

def test_copy_between_launches_orders_them_and_they_stay_apart():
    res = fused("table_between.cu")
    assert (res.launches_before, res.launches_after) == (2, 2)
    # S0 copy to x; S1 coef = first; S2 scale; S3 coef[4:8] = second; S4 shift
    assert deps_on(res, "@coef") == {("S1", "S2", "RAW"), ("S1", "S3", "WAW"),
                                     ("S1", "S4", "RAW"), ("S2", "S3", "WAR"),
                                     ("S3", "S4", "RAW")}
    (w,) = [e for e in res.uar.effects["S3"] if e.buffer == "@coef"]
    assert (w.mode, w.box) == ("write", (16, 31))
    assert [type(op).__name__ for op in res.host.ops if isinstance(op, Copy | Launch)] == \
        ["Copy", "Copy", "Launch", "Copy", "Launch", "Copy"]
    md = report_md(res)
    assert "S2 scale: fusion merges only launches with no host operation between them, and " \
        "the copy H2D at table_between.cu:27 and the copy H2D at table_between.cu:29" in md


def test_the_second_launch_sees_the_new_table():
    res = fused("table_between.cu")
    rep = verify_fused(res.original, res, seed=5, orders=("forward", "reverse"))
    assert rep.ok and rep.outputs == ("z",), rep.render()
    r = run_fused(res)
    first, second = r.host["first"][:32].view(F32), r.host["second"][:16].view(F32)
    new = np.concatenate([first[:4], second])
    x = r.initial["x"]
    i = np.arange(x.size) % 8
    want = x * first[i] + new[i]
    np.testing.assert_allclose(r.final["z"], want, rtol=1e-5, atol=1e-6)
    # the old table (first[4:8]) would give other values wherever second differs from it
    old = x * first[i] + first[i]
    assert not np.allclose(r.final["z"], old, rtol=1e-5, atol=1e-6)
