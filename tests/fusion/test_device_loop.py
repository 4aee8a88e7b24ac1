"""Host loops that run on the device (issue 15 item 4, `--megakernel grid`): a host loop whose
body became one megakernel is replaced by one launch of it, the loop inside the kernel
(fusion/megakernel.py `device_loop`, codegen/grid.py `_device_loop`), and the CPU executor runs
that form (runtime/cpu/entries.py `_loop_segments`). docs/fusion-megakernel.md, "Host loops on
the device"."""

from __future__ import annotations

import dataclasses
import re

import pytest

from sirius.fusion import rounds
from sirius.fusion.plan.planner import Options
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT

PROGRAMS = ROOT / "tests/fusion/device_loop_programs"
ORDERS = ("forward", "reverse", "random:3")


def _kernel(ir: str, name: str) -> str:
    m = re.search(rf"define [^\n]*@{name}\(.*?\n}}\n", ir, re.S)
    assert m, f"{name} is not in the module"
    return m.group(0)


def test_a_long_host_loop_runs_inside_the_megakernel():
    """rnn_steps.cu: 100 steps of two launches with a GLOBAL dependence each way, more than
    --unroll launches. The loop becomes one launch; in the kernel the iteration steps the input
    row pointer (by N floats) and the step number (by 1); every value matches the original's
    in three block orders, and the executor counts a grid barrier between every two of the
    200 segment runs."""
    res = fuse([PROGRAMS / "rnn_steps.cu"], Options(megakernel="grid"))
    assert (res.launches_before, res.launches_after) == (200, 1)
    (mk,) = res.megakernels
    loop = mk.kernel.spec.device_loop
    assert loop is not None and loop.trips == 100
    assert sorted(s for _, _, s, _ in loop.strides) == [1, 1024 * 4]  # s, and x + s * N
    assert any("runs inside it: 100 iterations" in r for r in mk.reasons)
    body = _kernel(res.device_ir, mk.name)
    assert "phi i32" in body and "!llvm.loop" in body  # a loop, not 100 unrolled copies
    assert body.count("call void @sirius_g0_seg") == 2
    rep = verify_fused(res.original, res, orders=ORDERS)
    assert rep.ok, rep.render()
    fused = rep.counters()["fused"]
    blocks = 1024 // 128
    assert fused["launches"] == 1 and fused["barriers"] == (200 - 1) * blocks


def test_arguments_that_do_not_step_are_caught(monkeypatch):
    """The check that makes the device loop trustworthy: with the strides left out (every
    iteration reads the first input row and step 0), the fused program still builds and runs,
    and verify reports the mismatch."""
    real = rounds.device_loop

    def no_strides(loop, k, launches):
        got = real(loop, k, launches)
        return got if isinstance(got, str) else (dataclasses.replace(got[0], strides=()),
                                                 got[1])

    monkeypatch.setattr(rounds, "device_loop", no_strides)
    res = fuse([PROGRAMS / "rnn_steps.cu"], Options(megakernel="grid"), use_cache=False)
    assert res.launches_after == 1
    rep = verify_fused(res.original, res, orders=("forward",))
    assert not rep.ok


def test_a_loop_without_its_iteration_barrier_is_refused_by_the_executor():
    """The executor runs a device loop only in the generated form: with the grid barrier
    between iterations deleted, the fused run faults with the executor's reason instead of
    running something else."""
    res = fuse([PROGRAMS / "rnn_steps.cu"], Options(megakernel="grid"))
    body = _kernel(res.device_ir, res.megakernels[0].name)
    latch = re.search(r"\n(again[\w.]*):[^\n]*\n(  [^\n]*\n)*?  br label", body)
    assert latch, body
    cut = body.replace(latch.group(0), re.sub(r"  (?:tail )?call[^\n]*sirius_grid_sync[^\n]*\n", "",
                                              latch.group(0)))
    assert cut != body
    res.device_ir = res.device_ir.replace(body, cut)
    rep = verify_fused(res.original, res, orders=("forward",))
    assert not rep.ok
    assert "outside the form the executor runs" in rep.render()


def test_with_counters_the_loop_runs_inside_with_waits_on_the_iteration_before():
    """The counters variant: in each iteration a block of `step` waits only for the blocks of
    `mix` it depends on (the wait table as without the loop), and instead of a grid barrier
    between iterations each block waits for the blocks of earlier iterations whose work its
    own depends on (lag-1 waits, from the isl relation across iterations); 200 -> 1, every
    value equal in three orders (the executor lets blocks run into later iterations as far
    as their waits allow)."""
    res = fuse([PROGRAMS / "rnn_steps.cu"], Options(megakernel="counters"))
    assert (res.launches_before, res.launches_after) == (200, 1)
    (mk,) = res.megakernels
    spec = mk.kernel.spec
    assert spec.device_loop.trips == 100
    assert {w.lag for w in spec.waits} == {0, 1}
    # across iterations too, a block waits only for the blocks whose work its own touches (a
    # block of `mix` reads h from its own block of `step` and the next), not for all 8
    assert any(w.lag and w.producers[1] - w.producers[0] + 1 < 8 for w in spec.waits)
    assert "grid_sync" not in _kernel(res.device_ir, mk.name)  # the waits order iterations
    rep = verify_fused(res.original, res, orders=ORDERS)
    assert rep.ok, rep.render()
    blocks = 1024 // 128
    # per iteration and block: a signal after each of the 2 segments and a wait before each
    # (the first one's on the iteration before), one block barrier each
    assert rep.counters()["fused"]["barriers"] == 4 * 100 * blocks


def test_a_missing_wait_on_the_iteration_before_is_caught(monkeypatch):
    """Without the lag-1 waits (and with no grid barrier between iterations), a block starts
    iteration i + 1 while others still work on iteration i: verify reports the mismatch."""
    from sirius.fusion import megakernel

    monkeypatch.setattr(megakernel, "loop_waits", lambda *a, **k: ())
    res = fuse([PROGRAMS / "rnn_steps.cu"], Options(megakernel="counters"), use_cache=False)
    assert res.launches_after == 1
    assert all(w.lag == 0 for w in res.megakernels[0].kernel.spec.waits)
    rep = verify_fused(res.original, res, orders=("forward", "reverse"))
    assert not rep.ok


def test_a_loop_with_a_rotating_address_stays_on_the_host_with_its_reason():
    """pingpong_steps.cu swaps two buffers on the host after each step: the arguments do not
    step by a constant, so the loop stays, one megakernel per iteration, and the report says
    why."""
    res = fuse([PROGRAMS / "pingpong_steps.cu"], Options(megakernel="grid"))
    assert (res.launches_before, res.launches_after) == (160, 80)
    (mk,) = res.megakernels
    assert mk.kernel.spec.device_loop is None
    assert any("stays on the host" in r and "rotating" in r for r in mk.reasons)


@pytest.mark.parametrize("variant", ["grid", "counters"])
def test_a_host_loop_nest_runs_inside_the_megakernel(variant):
    """rnn_layers.cu: 3 layers x 20 steps of two dependent launches, a perfect host loop nest
    of 120 launches. With --unroll 0 the whole nest becomes one launch: the kernel runs the 60
    iterations in the host's order as one loop, the layer's row of h stepping with the outer
    level and the input row with the inner one (the cell number with both), every value
    equal in three orders. grid: a grid barrier between every two of the 120 segment runs;
    counters: waits on the iteration before, lexicographically over (l, s)."""
    res = fuse([PROGRAMS / "rnn_layers.cu"], Options(megakernel=variant, unroll=0))
    assert (res.launches_before, res.launches_after) == (120, 1)
    (mk,) = res.megakernels
    loop = mk.kernel.spec.device_loop
    assert loop.trips == 60 and loop.levels == (3, 20)
    # (level, stride): h + l * N (both members) and s + l step with l; x + s * N and s + l
    # with s
    assert sorted((lv, s) for _, _, s, lv in loop.strides) == [(0, 1), (0, 4096), (0, 4096),
                                                                (1, 1), (1, 4096)]
    assert any("host loop nest" in r and "runs inside it: 60 iterations" in r
               for r in mk.reasons)
    rep = verify_fused(res.original, res, orders=ORDERS)
    assert rep.ok, rep.render()
    fused = rep.counters()["fused"]
    assert fused["launches"] == 1
    if variant == "grid":
        assert fused["barriers"] == (120 - 1) * (1024 // 128)
    else:
        assert any(w.lag == 1 for w in mk.kernel.spec.waits)


def test_a_nest_without_its_outer_strides_is_caught(monkeypatch):
    """With the outer level's strides left out (every layer works on row 0 and cell s), the
    fused nest still builds and runs, and verify reports the mismatch."""
    real = rounds.device_loop

    def inner_only(nest, k, launches):
        got = real(nest, k, launches)
        if isinstance(got, str):
            return got
        return (dataclasses.replace(got[0], strides=tuple(x for x in got[0].strides
                                                          if x[3] > 0)), got[1])

    monkeypatch.setattr(rounds, "device_loop", inner_only)
    res = fuse([PROGRAMS / "rnn_layers.cu"], Options(megakernel="grid", unroll=0),
               use_cache=False)
    assert res.launches_after == 1
    rep = verify_fused(res.original, res, orders=("forward",))
    assert not rep.ok


def test_a_nest_level_that_does_not_step_stays_on_the_host():
    """rnn_two_rows.cu: layer l works on row l % 2 of h, which is not l times a constant: the
    layer loop stays on the host, with that reason, and the step loop inside it runs in the
    kernel (120 -> 3 launches, one per layer)."""
    res = fuse([PROGRAMS / "rnn_two_rows.cu"], Options(megakernel="grid", unroll=0))
    assert (res.launches_before, res.launches_after) == (120, 3)
    (mk,) = res.megakernels
    assert mk.kernel.spec.device_loop.trips == 20 and not mk.kernel.spec.device_loop.levels
    assert any("`l`" in r and "stays on the host" in r and "not l times a constant" in r
               for r in mk.reasons)
    assert any("`s`" in r and "runs inside it: 20 iterations" in r for r in mk.reasons)
    rep = verify_fused(res.original, res, orders=("forward", "reverse"))
    assert rep.ok, rep.render()


def test_launches_whose_shape_the_host_computes_stay_launches_with_the_reason():
    """rnn_shrinking.cu: the grid shrinks with the layer, so the launches cannot be members of
    a megakernel (fixed shapes): they stay launches, report.md says why, and nothing is
    undone with a code-generation error (once: "member 0 has grid (0, 0, 0)")."""
    res = fuse([PROGRAMS / "rnn_shrinking.cu"], Options(megakernel="grid", unroll=0))
    assert (res.launches_before, res.launches_after) == (120, 120)
    assert not res.undone
    notes = [n for r in res.regions for n in r.notes]
    assert any("mix: not a megakernel member" in n and "computed by the host" in n
               for n in notes)


@pytest.mark.parametrize("variant", ["grid", "counters"])
def test_a_loop_of_one_launch_runs_inside_a_megakernel_of_it(variant):
    """accumulate_steps.cu: one launch per iteration (no megakernel of two launches to make):
    the launch becomes a one-member megakernel that takes the loop inside, 100 -> 1, every
    value equal in three orders; with counters no block waits at all: each needs only its own
    previous iteration (the dependence is THREAD wide), which it ran already."""
    res = fuse([PROGRAMS / "accumulate_steps.cu"], Options(megakernel=variant))
    assert (res.launches_before, res.launches_after) == (100, 1)
    (mk,) = res.megakernels
    spec = mk.kernel.spec
    assert len(spec.members) == 1 and spec.device_loop.trips == 100
    if variant == "counters":
        assert spec.waits == ()
    rep = verify_fused(res.original, res, orders=ORDERS)
    assert rep.ok, rep.render()


def test_a_lone_launch_whose_loop_stays_is_left_as_it_was():
    """kernels/stencil_pingpong.cu with --unroll 0: its one launch per iteration swaps buffers
    on the host (a rotating address), so the loop cannot move inside; no one-member megakernel
    is left behind (the launches are the original's), and the report says why."""
    res = fuse([ROOT / "kernels/stencil_pingpong.cu"], Options(megakernel="grid", unroll=0))
    assert (res.launches_before, res.launches_after) == (5, 5) and not res.megakernels
    notes = [n for r in res.regions for n in r.notes]
    assert any("jacobi2d: its host loop" in n and "rotating" in n for n in notes), notes


def test_a_device_loop_survives_loop_fuse(tmp_path):
    """Random program 99145 (a stacked-recurrence nest of one launch per cell, other fused
    kernels with two loops): loop-fuse took the `optnone` off the device loop's kernel body
    (it shared an attribute group with a function the pass had marked and unmarked), LLVM then
    rewrote the 3-trip loop into boolean phis, and the executor refused the kernel; seeds 99105
    and 99109 failed in the same pass ("functions with and without noinline share a group")."""
    from tests.randprog.fuse_check import fuse_and_verify

    out = fuse_and_verify(99145, "vertical", tmp_path, megakernel="grid", unroll=0,
                          raise_on_failure=False)
    assert out.ok, out.message()
    assert out.device_loops >= 1
