"""Verification knows when the original program is itself order-dependent (issue 12 item 5):
it runs the original under forward and reverse order first; buffers that differ there are named
(with the count of differing elements) and compared with the original run in the same order,
a difference there being unchecked rather than blamed on the fusion; `sirius verify` exits 3.
A fusion error in the other buffers is still a mismatch (exit 1)."""

from __future__ import annotations

import dataclasses
import functools
import json

import numpy as np

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import ScalarArg
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

PROGRAMS = ROOT / "tests" / "fusion" / "verify_programs"
RACE, SCATTER = str(PROGRAMS / "race.cu"), str(PROGRAMS / "scatter.cu")


@functools.cache
def fused(path: str):
    from sirius.pipeline import fuse

    return fuse([path])


def test_race_is_the_originals_not_the_fusions() -> None:
    # race<<<1, 32>>>: threads 0 and 1 store 1 and 2 to cell[0]; forward runs thread 1 last
    # (2), reverse runs thread 0 last (1). scale -> shift is fused with it (3 launches -> 1).
    proc = run_cli("verify", RACE, "--json", "-q")
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "original-order-dependent" and doc["ok"] is False
    assert doc["order_dependent"] == [{"buffer": "cell", "elements": 1, "mismatches": 1,
                                       "first_index": 0, "first": "2", "second": "1"}]
    rows = {(r["order"], r["buffer"]): r for r in doc["rows"]}
    for order in ("forward", "reverse", "random:7"):
        z, cell = rows[(order, "z")], rows[(order, "cell")]
        assert z["ok"] and z["checkable"] and z["reference"] == "forward"
        assert not cell["checkable"] and cell["reference"] == order
    # the fused kernel runs the race's block with the same thread order: same cell values
    assert rows[("forward", "cell")]["ok"] and rows[("reverse", "cell")]["ok"]


def test_race_verdict_in_words() -> None:
    proc = run_cli("verify", RACE, "-q")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "original is order-dependent: cell: 1 of 1 elements differ between its forward and " \
           "reverse runs; first at [0]: 2 vs 1" in out
    assert "verdict: INCONCLUSIVE" in out and "NOT OK" not in out
    assert "ok (same order)" in out


def _scatter_expectation(idx: np.ndarray, v: np.ndarray) -> tuple[int, int, np.float32]:
    """(cells that differ between forward and reverse, first such cell, its forward value) by
    the program's rule: block b's thread i stores v[i] to cell 64 b + idx[i] % 64; the last
    store wins, i.e. the highest i of the cell in forward order and the lowest in reverse."""
    first_writer: dict[int, int] = {}
    last_writer: dict[int, int] = {}
    for i in range(idx.size):
        cell = (i // 256) * 64 + int(idx[i]) % 64
        first_writer.setdefault(cell, i)
        last_writer[cell] = i
    differ = sorted(c for c in last_writer
                    if v[last_writer[c]].tobytes() != v[first_writer[c]].tobytes())
    return len(differ), differ[0], v[last_writer[differ[0]]]


def test_scatter_with_colliding_indices_nothing_fused() -> None:
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    res = fused(SCATTER)
    assert res.launches_before == res.launches_after == 1 and not res.fused
    # every launch in every order (--no-replay): the original's own race shows
    rep = verify_fused(res.original, res, seed=7, replay=False)
    assert rep.status == "original-order-dependent" and rep.exit_status == 3
    assert rep.failed() == [] and not rep.faults
    o = res.original
    run = run_host_program(o.host, o.program, o.kernels, CpuDevice(seed=7), seed=7)
    count, first, value = _scatter_expectation(run.initial["idx"], run.initial["v"])
    (dep,) = rep.order_dependent
    assert (dep.buffer, dep.elements, dep.mismatches, dep.first_index) == (
        "out", 1024, count, first)
    assert dep.first == str(value)
    # the program is its own fusion: the same order gives the same result, row by row
    assert all(r.ok and not r.checkable and r.reference == r.order for r in rep.rows)


def test_a_fusion_error_is_still_blamed_when_the_original_races() -> None:
    from sirius.pipeline import fuse

    # no post-fusion passes: host-constants would fold n into the kernel, and the planted
    # bug (a launch argument changed after fusion) would change nothing
    res = fuse([RACE], passes=())
    (launch,) = res.host.launches()
    n = Expr(4096)
    args = tuple(ScalarArg(a.type, Expr(4000)) if isinstance(a, ScalarArg) and a.value == n
                 else a for a in launch.args)
    assert args != launch.args
    bad = dataclasses.replace(res, host=dataclasses.replace(
        res.host, ops=tuple(dataclasses.replace(launch, args=args) if op is launch else op
                            for op in res.host.ops)))
    rep = verify_fused(res.original, bad, seed=7, orders=("forward",))
    assert rep.status == "mismatch" and rep.exit_status == 1
    (row,) = rep.failed()
    assert (row.buffer, row.mismatches, row.first_index) == ("z", 96, 4000)
    assert [d.buffer for d in rep.order_dependent] == ["cell"]
    assert "verdict: NOT OK" in rep.render()


def test_original_runs_once_when_every_fused_order_agrees() -> None:
    # elementwise chain: every fused order agrees with the forward original, so the original
    # is not run again (issue 16 item 7: the original once, the fused orders in parallel)
    res = fused(str(ROOT / "kernels" / "elementwise_chain.cu"))
    lines: list[str] = []
    rep = verify_fused(res.original, res, seed=7, orders=("forward", "reverse", "random:3"),
                       progress=lines.append)
    assert rep.ok and rep.order_dependent == () and all(r.checkable for r in rep.rows)
    assert sum(line.startswith("running the original program") for line in lines) == 1
    assert rep.original_orders == ("forward",)
    assert "original run once (forward order): every fused run agreed with it" in rep.render()


def test_a_difference_runs_the_original_again_before_it_is_blamed() -> None:
    # a planted wrong scalar in the fused program: the fused runs differ from the reference, so
    # the original runs once more (reverse) to rule out its own order-dependence; it is
    # deterministic, so the difference is a mismatch
    from sirius.pipeline import fuse

    res = fuse([str(ROOT / "kernels" / "elementwise_chain.cu")], passes=())  # (see below)
    (launch,) = res.host.launches()
    n = max(a.value.const for a in launch.args
            if isinstance(a, ScalarArg) and isinstance(a.value, Expr) and a.value.is_const)
    args = tuple(ScalarArg(a.type, Expr(n - 96)) if isinstance(a, ScalarArg) and
                 a.value == Expr(n) else a for a in launch.args)
    assert args != launch.args
    bad = dataclasses.replace(res, host=dataclasses.replace(
        res.host, ops=tuple(dataclasses.replace(launch, args=args) if op is launch else op
                            for op in res.host.ops)))
    lines: list[str] = []
    rep = verify_fused(res.original, bad, seed=7, orders=("forward", "reverse"),
                       progress=lines.append)
    assert not rep.ok and rep.status == "mismatch" and rep.order_dependent == ()
    assert rep.original_orders == ("forward", "reverse")
    assert sum(line.startswith("running the original program again (reverse order)")
               for line in lines) == 1
    assert "original run in forward and reverse order: deterministic" in rep.render()


def test_launch_replay_takes_the_first_orders_result_of_a_kernel_the_fusion_did_not_make():
    """By default the fused runs after the first order take the first order's result of a
    launch of a kernel the fusion did not make, on the same inputs (sirius/verify/replay.py):
    the scatter kernel is the original's, so its race is not run again and verify is about the
    fusion only; the report says what was replayed. A fused kernel always runs (race.cu: the
    racing kernel is fused, and the race still shows)."""
    res = fused(SCATTER)
    rep = verify_fused(res.original, res, seed=7)
    assert rep.status == "ok" and not rep.order_dependent
    assert rep.replayed == (("reverse", 1), ("random:1", 1))
    assert rep.replay_kernels == ("_Z7scatterPKjPKfPfi",)
    assert "replayed launches (reverse: 1, random:1: 1)" in rep.render()
    race = fused(RACE)
    assert race.fused
    rep = verify_fused(race.original, race, seed=7)
    assert rep.status == "original-order-dependent" and not rep.replayed
