"""`sirius.verify.differential`: a fused program checked against its original on the CPU executor.
Correct fusions (from test_codegen's builds) must verify bitwise; planted bugs (a dropped
launch, a missing barrier, a divergent barrier, an out-of-bounds launch, an off-by-one count)
must not. Expected counts are derived from the programs' sources in the comments."""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import numpy as np
from codegen_support import corpus, fused_program, replace_launches, run
from test_codegen import CHAIN_MAPS, chain, mba, reductions

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import (
    Buffer,
    Copy,
    DevRef,
    HostProgram,
    HostRef,
    Loop,
    Rotating,
    ScalarArg,
)
from sirius.fusion.codegen.emit import build
from sirius.fusion.spec import GLOBAL, FusedKernelSpec
from sirius.verify.differential import compare, observed, verify_fused

N = 4096  # elements of every buffer of elementwise_chain.cu (16384 bytes of float)


@dataclasses.dataclass(frozen=True)
class Fused:
    device_ir: str
    host: HostProgram


def fused_chain() -> Fused:
    e, fm = chain()
    return Fused(fm.text, fused_program(e, fm, [0, 1, 2, 3]))


def with_scalar(host: HostProgram, launch: int, arg: int, value: int) -> HostProgram:
    """`host` with scalar argument `arg` of top-level launch `launch` set to `value`."""
    target = host.launches()[launch]
    new = dataclasses.replace(target, args=tuple(
        ScalarArg(a.type, Expr(value)) if i == arg else a for i, a in enumerate(target.args)))
    return dataclasses.replace(host, ops=tuple(new if op is target else op for op in host.ops))


# correct fusions ---------------------------------------------------------------------------------

def test_chain_fusion_verifies_bitwise_under_every_order():
    e, _ = chain()
    lines: list[str] = []
    rep = verify_fused(e, fused_chain(), progress=lines.append)
    assert rep.ok and not rep.faults
    # d_out is the one buffer copied back (role output); d_x, d_bias, d_y, d_z are not compared
    assert rep.outputs == ("d_out",)
    assert [(r.order, r.buffer) for r in rep.rows] == [
        ("forward", "d_out"), ("reverse", "d_out"), ("random:1", "d_out")]
    for r in rep.rows:
        assert (r.dtype, r.elements, r.mismatches, r.bitwise) == ("float32", N, 0, True)
        assert (r.max_abs, r.max_rel) == (0.0, 0.0)
    # four launches in the original, one fused launch in each fused run
    assert rep.reference_launches == 4
    assert rep.fused_launches == (("forward", 1), ("reverse", 1), ("random:1", 1))
    assert lines[0].startswith("running the original program")
    assert sum("running the fused program" in s for s in lines) == 3
    text = rep.render()
    assert "d_out" in text and "verdict: OK" in text and "f32/f64: rtol 1e-5 atol 1e-6" in text
    plain = rep._render_plain()  # without rich
    assert plain.splitlines()[0].split() == ["order", "buffer", "dtype", "elements", "mismatches",
                                             "max", "abs", "max", "rel", "bitwise", "tolerance",
                                             "result"]
    js = json.loads(json.dumps(rep.to_json()))
    assert js["ok"] is True and js["fused_launches"] == {"forward": 1, "reverse": 1,
                                                         "random:1": 1}


def test_exact_mode_and_fused_kernels_argument():
    # the chain is bitwise equal, so exact mode passes too; `fused.kernels` may be given
    e, fm = chain()
    fused = Fused(fm.text, fused_program(e, fm, [0, 1, 2, 3]))
    with_kernels = type("WithKernels", (), {"device_ir": fused.device_ir, "host": fused.host,
                                            "kernels": e.kernels})()
    rep = verify_fused(e, with_kernels, orders=("reverse",), exact=True)
    assert rep.ok and rep.exact and [r.tolerance for r in rep.rows] == ["bitwise"]


def test_matmul_bias_act_with_its_barrier_verifies():
    mm, fm = mba(True)
    rep = verify_fused(mm, Fused(fm.text, fused_program(mm, fm, [0, 1, 2])))
    assert rep.ok and all(r.bitwise for r in rep.rows)


# planted bugs --------------------------------------------------------------------------------

def test_dropped_launch_fails():
    # scale, add_bias and relu fused; the square launch is gone, so nothing writes d_out: it
    # keeps its seeded data, uniform in [-1, 1), where the original has relu(..)^2. No element
    # is within tolerance (a random float is not within 1e-6 of the computed value).
    e, _ = chain()
    spec = FusedKernelSpec("chain3", "vertical", tuple(
        e.member(i, param_map=m, mapping=GLOBAL) for i, m in enumerate(CHAIN_MAPS[:3])))
    fm = build(e.program.device_ir, [spec])
    new = fm.kernel("chain3").launch(e.launches[:3])
    host = replace_launches(e.host, [0, 1, 2, 3], new)
    assert len(host.launches()) == 1
    rep = verify_fused(e, Fused(fm.text, host))
    assert not rep.ok and not rep.faults
    assert [(r.buffer, r.mismatches, r.ok, r.bitwise) for r in rep.rows] == \
        [("d_out", N, False, False)] * 3
    assert "verdict: NOT OK (3 of 3 rows differ)" in rep.render()


def test_missing_barrier_fails_under_every_order():
    # Without the barrier, fused thread t = 16a + b of a block reads C at the transpose of what
    # it wrote, which thread 16b + a writes. Threads run to completion after matmul's last
    # barrier, so of each pair (a != b) exactly the one that runs first reads a stale C, in
    # whatever order: 16*15/2 = 120 wrong elements per block, 16 blocks -> 1920 of 4096, under
    # forward, reverse and random orders alike (different elements each time).
    mm, bad = mba(True, barrier=False)
    rep = verify_fused(mm, Fused(bad.text, fused_program(mm, bad, [0, 1, 2])))
    assert not rep.ok and not rep.faults
    assert [(r.order, r.buffer, r.mismatches, r.ok) for r in rep.rows] == [
        ("forward", "d_out", 1920, False), ("reverse", "d_out", 1920, False),
        ("random:1", "d_out", 1920, False)]
    assert all(r.max_abs > 1e-3 for r in rep.rows)
    assert rep.to_json()["ok"] is False


def test_divergent_barrier_is_a_mismatch_not_a_crash():
    # a __syncthreads in the member that runs on 128 of the 256 threads (test_codegen's
    # test_block_barrier_in_a_partial_member_deadlocks): every run faults
    tr, fm = reductions("horizontal")
    text = fm.text.replace("@llvm.nvvm.barrier.cta.sync.count(i32 1, i32 128)",
                           "@llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)")
    rep = verify_fused(tr, Fused(text, fused_program(tr, fm, [0, 1])), orders=("forward",))
    assert not rep.ok and rep.fused_launches == ()
    [(order, message)] = rep.faults
    assert order == "forward" and "divergent barrier in kernel red" in message
    assert rep.rows and all(r.error == "the run faulted" and r.mismatches is None
                            for r in rep.rows)
    text = rep.render()
    assert "divergent barrier in kernel red" in text and "FAIL: the run faulted" in text


def test_out_of_bounds_launch_is_caught_by_the_bounds_check():
    # n = 4100 instead of 4096: square's member (43 blocks of 96 = 4128 threads) reads z and
    # writes out 4 elements past their 16384 bytes. Those 16 bytes land in the executor's red
    # zone, so without the bounds check every compared element is still right.
    e, fm = chain()
    host = with_scalar(fused_program(e, fm, [0, 1, 2, 3]), 0, 3, N + 4)
    rep = verify_fused(e, Fused(fm.text, host), orders=("forward",))
    assert not rep.ok
    [(_, message)] = rep.faults
    assert "out-of-bounds" in message and "kernel chain" in message
    assert verify_fused(e, Fused(fm.text, host), orders=("forward",), check_bounds=False).ok


def test_missing_buffer_is_a_mismatch():
    # the fused program renames d_out: the original's output is not there
    e, fm = chain()
    host = fused_program(e, fm, [0, 1, 2, 3])
    renamed = HostProgram(host.entry, tuple(
        dataclasses.replace(b, name="d_other") if b.name == "d_out" else b
        for b in host.buffers), _rename(host.ops, "d_out", "d_other"))
    rep = verify_fused(e, Fused(fm.text, renamed), orders=("forward",))
    [row] = rep.rows
    assert (row.buffer, row.ok, row.error) == ("d_out", False, "missing in the fused run")


def _rename(ops, old: str, new: str):
    def fix(v):
        if isinstance(v, DevRef) and v.buffer == old:
            return dataclasses.replace(v, buffer=new)
        if isinstance(v, str) and v == old:
            return new
        if isinstance(v, tuple):
            return tuple(fix(x) for x in v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type | Expr):
            return dataclasses.replace(v, **{f.name: fix(getattr(v, f.name))
                                             for f in dataclasses.fields(v)})
        return v
    return tuple(fix(op) for op in ops)


@functools.cache
def histogram():
    return corpus("histogram_atomics.cu")


def test_integer_count_off_by_one_fails():
    # histogram(data, hist, n) with n = 8191 instead of 8192: the grid-stride loop skips
    # data[8191], so bin data[8191] % 64 counts one less and every other bin is equal
    h = histogram()
    host = with_scalar(h.host, 0, 2, 8191)
    rep = verify_fused(h, Fused(h.program.device_ir, host), orders=("forward", "reverse"))
    assert not rep.ok
    ref = run(h.host, h.program, h)
    data, hist = ref.initial["d_data"], ref.final["d_hist"]
    assert hist.dtype == np.uint32 and int(hist.sum()) == 8192
    b = int(data[8191]) % 64
    for r in rep.rows:
        assert (r.buffer, r.dtype, r.tolerance) == ("d_hist", "uint32", "bitwise")
        assert (r.mismatches, r.max_abs) == (1, 1.0)
        assert math.isclose(r.max_rel, 1 / int(hist[b]))
    # and the unchanged program verifies against itself (integer atomics: any order)
    assert verify_fused(h, Fused(h.program.device_ir, h.host), orders=("random:3",)).ok


# the comparison rule -------------------------------------------------------------------------

def test_float_tolerance():
    ref = np.array([1.0, -2.0, 0.0, 100.0], dtype=np.float32)
    # within: |d| <= 1e-6 + 1e-5 * |ref| -> 1.1e-5, 2.1e-5, 1e-6, 1.0001e-3
    near = np.array([1.0 + 8e-6, -2.0 - 1.6e-5, 5e-7, 100.0 + 9e-4], dtype=np.float32)
    c = compare(near, ref)
    assert c.ok and c.mismatches == 0 and not c.bitwise
    assert c.tolerance == "rtol=1e-05 atol=1e-06"
    assert math.isclose(c.max_abs, float(np.float32(100.0 + 9e-4)) - 100.0, rel_tol=1e-9)
    # rel of the 0.0 element: 5e-7 / tiny(float32)
    assert math.isclose(c.max_rel, float(np.float32(5e-7)) / float(np.finfo(np.float32).tiny))
    # exact mode: the same array has 4 mismatches
    assert compare(near, ref, exact=True).mismatches == 4
    # outside: 1e-4 relative at 1.0 and 2e-6 at 0.0 fail; the other two are bitwise equal
    far = np.array([1.0 + 1e-4, -2.0, 2e-6, 100.0], dtype=np.float32)
    c = compare(far, ref)
    assert not c.ok and c.mismatches == 2
    assert math.isclose(c.max_abs, float(np.float32(1.0 + 1e-4)) - 1.0, rel_tol=1e-9)


def test_nan_inf_and_shape():
    nan, inf = np.float32("nan"), np.float32("inf")
    ref = np.array([nan, inf, 1.0, -inf], dtype=np.float32)
    assert compare(ref.copy(), ref).ok and compare(ref.copy(), ref, exact=True).ok
    c = compare(np.array([1.0, inf, nan, inf], dtype=np.float32), ref)
    assert c.mismatches == 3 and c.max_abs == math.inf  # nan vs 1, 1 vs nan, inf vs -inf
    c = compare(np.zeros(3, np.float32), np.zeros(4, np.float32))
    assert not c.ok and "got 3 x float32, expected 4 x float32" in c.message


def test_integers_must_be_bitwise_equal():
    ref = np.array([5, 1000, -7], dtype=np.int32)
    got = ref.copy()
    got[1] += 1
    c = compare(got, ref)
    assert (c.ok, c.mismatches, c.max_abs, c.tolerance) == (False, 1, 1.0, "bitwise")
    assert math.isclose(c.max_rel, 1 / 1000)
    assert compare(ref.copy(), ref).ok
    # bytes too (a buffer no kernel parameter types)
    assert compare(np.array([1, 2], np.uint8), np.array([1, 3], np.uint8)).mismatches == 1


# which buffers are compared ------------------------------------------------------------------

def test_observed_buffers():
    bufs = (Buffer(0, "a", 16, "input"), Buffer(1, "b", 16, "temp"), Buffer(2, "c", 16, "temp"))
    # no outputs and no copies back: every buffer
    names, rule = observed(HostProgram("main", bufs, ()))
    assert names == ["a", "b", "c"] and rule.startswith("all buffers")
    # a device-to-host copy in a loop from a ping-pong address: both choices
    rot = Rotating((DevRef("b"), DevRef("c")), Expr.var("t").mod(2))
    loop = Loop("t", Expr(0), Expr(4), 1, (Copy("D2H", HostRef("h"), rot, Expr(16)),))
    names, rule = observed(HostProgram("main", bufs, (loop,)))
    assert names == ["b", "c"] and rule.startswith("outputs")
    # role output plus a copied temp, each once
    bufs2 = (*bufs[:2], Buffer(2, "c", 16, "output"))
    copy = Copy("D2H", HostRef("h"), DevRef("c"), Expr(16))
    copy_b = Copy("D2H", HostRef("h"), DevRef("b"), Expr(16))
    names, _ = observed(HostProgram("main", bufs2, (copy, copy_b)))
    assert names == ["c", "b"]

