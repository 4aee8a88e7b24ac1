"""Idle host syncs are crossed (sirius/analysis/host/observe.py, sirius/fusion/plan/syncs.py).

A sync between launches ends a run only if the host, before the next GPU operation, touches the
host memory of an asynchronous copy issued before the sync. Expected counts come from the
programs' sources (their header comments say which syncs are idle)."""

from __future__ import annotations

import functools
import json

import pytest

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import HostProgram, Launch, Loop, Sync
from sirius.analysis.program import analyse
from sirius.diagnostics import Location
from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options
from sirius.fusion.plan.syncs import cross_idle_syncs
from sirius.fusion.report import plan_json, report_md
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT

PROGRAMS = ROOT / "tests" / "fusion" / "sync_programs"


@functools.cache
def fused(name: str, *defines: str, cross: bool = True) -> FuseResult:
    return fuse([PROGRAMS / name], Options(cross_syncs=cross),
                flags=[f"-D{d}" for d in defines])


def syncs_of(host: HostProgram) -> list[Sync]:
    return [op for op in host.ops if isinstance(op, Sync)]


# the program of the issue: two independent matrix products, a sync (and a timer) after each ---

def test_independent_products_fuse_across_idle_syncs_and_verify():
    res = fused("two_mm_sync.cu")
    assert (res.launches_before, res.launches_after) == (2, 1)
    assert [rec.arrangement for rec in res.fused] == ["horizontal"]
    # the sync after the first product (line 51) is crossed; the fused program keeps the one
    # after the second (line 55, cudaThreadSynchronize), right after the fused launch
    assert [c.sync.loc.line for c in res.syncs.crossed] == [51]
    ops = res.host.ops
    k = next(i for i, op in enumerate(ops) if isinstance(op, Launch))
    assert isinstance(ops[k + 1], Sync) and ops[k + 1].loc.line == 55
    assert len(syncs_of(res.host)) == 1
    rep = verify_fused(res.original, res, seed=3, orders=("forward", "reverse"))
    assert rep.ok and all(r.bitwise for r in rep.rows), rep.render()
    doc = plan_json(res)
    assert [c["loc"].rsplit(":", 2)[-2] for c in doc["syncs"]["crossed"]] == ["51"]
    assert "timers" in doc["syncs"]["note"]
    md = report_md(res)
    assert "## Host synchronisations" in md and "two_mm_sync.cu:51" in md and "crossed" in md
    assert "are not observations" in md


def test_a_sync_after_every_launch_fuses_like_no_sync():
    with_syncs, without = fused("two_mm_sync.cu"), fused("two_mm_sync.cu", "NO_SYNC")
    assert not syncs_of(without.original.host)
    assert without.launches_after == with_syncs.launches_after == 1
    assert [[n.launch.kernel for n in r.nodes] for r in with_syncs.fused] == \
        [[n.launch.kernel for n in r.nodes] for r in without.fused]


def test_keep_syncs_leaves_every_sync_a_boundary():
    res = fused("two_mm_sync.cu", cross=False)
    assert (res.launches_before, res.launches_after) == (2, 2)
    assert res.syncs is None and "--keep-syncs" in report_md(res)


# a sync the host observes is kept ----------------------------------------------------------------

def test_host_reading_an_async_copy_after_the_sync_keeps_it():
    res = fused("observed_sync.cu")
    # product 1 | async copy | product 2, sync (observed), product 3, sync: nothing fuses
    assert (res.launches_before, res.launches_after) == (3, 3)
    assert not res.syncs.crossed
    [kept] = res.syncs.kept
    assert kept.sync.loc.line == 42
    assert "reads 'h'" in kept.sync.observed and "observed_sync.cu:44" in kept.sync.observed
    assert "observed_sync.cu:40" in kept.sync.observed  # the asynchronous copy
    assert any("observed_sync.cu:42" in n and "kept" in n
               for n in json.loads(json.dumps(plan_json(res)))["not_fused"])
    rep = verify_fused(res.original, res, seed=3, orders=("forward",))
    assert rep.ok, rep.render()


def test_without_the_read_the_same_sync_is_crossed():
    res = fused("observed_sync.cu", "NO_READ")
    assert (res.launches_before, res.launches_after) == (3, 2)
    assert [c.sync.loc.line for c in res.syncs.crossed] == [42]
    rep = verify_fused(res.original, res, seed=3, orders=("forward", "reverse"))
    assert rep.ok, rep.render()


def _sync_between(case: int) -> Sync:
    _, _, host = analyse([PROGRAMS / "async_cases.cu"], flags=[f"-DCASE={case}"])
    return syncs_of(host)[0]


@pytest.mark.parametrize("case,start,copy_line", [
    (1, "the host writes 'h_in' at", 32),  # memory an asynchronous H2D copy reads
    (2, "the host reads 'h_out' at", 33),  # read inside a loop the host model skips
    (3, "", None),  # timers, and a read of an asynchronous H2D copy's source
    (4, "", None),  # a host array no copy uses
])
def test_what_counts_as_an_observation(case: int, start: str, copy_line: int | None):
    why = _sync_between(case).observed
    if not start:
        assert why == ""
    else:
        assert why.startswith(start) and f"async_cases.cu:{copy_line}" in why


# the rewrite itself ------------------------------------------------------------------------------

def _launch(name: str, line: int) -> Launch:
    one = (Expr(1), Expr(1), Expr(1))
    return Launch(name, name, one, one, Expr(0), (), Location("p.cu", line))


def _sync(line: int, observed: str = "") -> Sync:
    return Sync("device", Location("p.cu", line), observed)


def _program(*ops) -> HostProgram:
    return HostProgram("main", (), tuple(ops))


def test_rewrite_moves_the_last_crossed_sync_after_the_run():
    a, b, c = _launch("a", 1), _launch("b", 3), _launch("c", 5)
    s2, s4 = _sync(2), _sync(4)
    out = cross_idle_syncs(_program(a, s2, b, s4, c))
    assert out.host.ops == (a, b, c, s4)
    assert [(x.sync, x.before, x.after) for x in out.crossed] == [(s2, "a", "b"), (s4, "b", "c")]


def test_rewrite_keeps_observed_syncs_and_moves_a_loops_idle_syncs_after_it():
    a, b, c = _launch("a", 1), _launch("b", 3), _launch("c", 5)
    s2, s4, s6 = _sync(2), _sync(4, "the host reads 'h'"), _sync(6)
    loop = Loop("t", Expr(0), Expr(4), 1, (a, s2, b, s6))
    out = cross_idle_syncs(_program(loop, c, s4, a, s2))
    # the loop body's idle syncs leave it (s2 between its launches, s6 between an iteration's
    # b and the next one's a); one is kept after the loop
    assert out.host.ops == (Loop("t", Expr(0), Expr(4), 1, (a, b)), s6, c, s4, a, s2)
    assert [x.sync for x in out.crossed] == [s2, s6]
    assert "the loop's exit (t at" in str(out.crossed[1])
    assert [k.sync for k in out.kept] == [s4]
    unchanged = _program(a, s4, b)
    assert cross_idle_syncs(unchanged).host is unchanged


def test_an_idle_sync_in_a_loop_body_leaves_it_so_the_loop_can_join_a_megakernel():
    """sync_in_loop.cu: each iteration ends with cudaDeviceSynchronize(), which the host does
    not observe: the sync leaves the loop body and one is kept after the loop; with
    --megakernel the 4 iterations are unrolled into one megakernel (8 -> 1), verified; the
    report names the crossed sync and the loop."""
    res = fuse([PROGRAMS / "sync_in_loop.cu"], Options(megakernel="grid"))
    assert (res.launches_before, res.launches_after) == (8, 1)
    (c,) = res.syncs.crossed
    assert c.kept_at.startswith("the loop's exit (t at")
    loops = [op for op in res.syncs.host.ops if isinstance(op, Loop)]
    assert loops and not any(isinstance(o, Sync) for lp in loops for o in lp.body)
    rep = verify_fused(res.original, res, seed=3, orders=("forward", "reverse"))
    assert rep.ok, rep.render()
    md = report_md(res)
    assert "No host loop considered" not in md and "loop t: 4 iterations unrolled" in md
