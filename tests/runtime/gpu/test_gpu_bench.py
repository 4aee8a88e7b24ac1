"""The bench library on a fake driver whose clock is known: an eager launch costs 5 us plus the
kernel's cost, a graph launch 3 us plus its kernels' costs. So the original (three launches of
a 10 us kernel) takes 45 us eagerly and 33 us as a graph, the fused program (one 25 us kernel)
30 us and 28 us; the medians and ratios must be exactly those. Also checked: the L2 flush runs
before every timed region and outside it, input sets rotate, host syncs are replayed eagerly
and left out of graphs, graphs are freed, and every allocation is given back."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import (
    Alloc,
    BufferArg,
    Copy,
    DevRef,
    Free,
    HostProgram,
    HostRef,
    Launch,
    Memset,
    Sync,
)
from sirius.runtime.gpu import GpuDevice, GpuError, PtxProgram
from sirius.runtime.gpu.bench import BenchConfig, BenchProgram, bench, summarize
from tests.runtime.gpu.test_gpu_device import PTX, _program, axpy

N = 256
F32 = np.dtype(np.float32)
DTYPES = {"x": F32, "y": F32, "z": F32}
FUSED_PTX = PTX + """
.visible .entry axpy3(
	.param .u64 .ptr .align 1 axpy3_param_0,
	.param .u64 .ptr .align 1 axpy3_param_1
)
{ ret; }
"""


def axpy3(drv, grid, block, smem, params: bytes) -> None:
    """The three axpy launches of the original in one kernel: y = ((y + x) + 2x) + 3x."""
    x, y = struct.unpack("<QQ", params)
    xs = drv.view(x, 4 * N).view(np.float32)
    ys = drv.view(y, 4 * N).view(np.float32)
    for a in (1, 2, 3):
        ys[:] = ys + np.float32(a) * xs


def _fused() -> HostProgram:
    nbytes = 4 * N
    orig = _program()
    launch = Launch("axpy3", "axpy3", (Expr(2), Expr(1), Expr(1)), (Expr(128), Expr(1), Expr(1)),
                    Expr(0), (BufferArg(DevRef("x")), BufferArg(DevRef("y"))))
    return HostProgram("main", orig.buffers, (
        Alloc("x", nbytes), Alloc("y", nbytes), Alloc("z", nbytes),
        Copy("H2D", DevRef("x"), HostRef("hx"), Expr(nbytes)),
        Memset(DevRef("y"), 0, Expr(nbytes)), launch, Sync("device"),
        Copy("D2D", DevRef("z"), DevRef("y"), Expr(nbytes)),
        Copy("D2H", HostRef("hz"), DevRef("z"), Expr(nbytes)), Free(DevRef("x"))))


def sides() -> dict[str, BenchProgram]:
    return {"original": BenchProgram(_program(), PtxProgram(PTX), dtypes=DTYPES),
            "fused": BenchProgram(_fused(), PtxProgram(FUSED_PTX), dtypes=DTYPES)}


def fake(**kw):
    from tests.runtime.gpu.fakedriver import FakeDriver

    drv = FakeDriver({"axpy": axpy, "axpy3": axpy3}, costs={"axpy": 10.0, "axpy3": 25.0},
                     launch_us=5.0, graph_us=3.0, **kw)
    return GpuDevice(drv, time_launches=False), drv


def test_summary_statistics() -> None:
    s = summarize(list(range(1, 101)))
    # linear interpolation between order statistics: p10 at rank 9.9 -> 10 + 0.9
    assert s == {"median_us": 50.5, "p10_us": pytest.approx(10.9), "p90_us": pytest.approx(90.1),
                 "mean_us": 50.5, "min_us": 1.0, "max_us": 100.0, "runs": 100}
    assert summarize([7.0])["p90_us"] == 7.0


def test_four_modes_with_known_costs() -> None:
    dev, drv = fake()
    res = bench(sides(), BenchConfig(runs=6, warmup=2, input_sets=3), device=dev)
    med = {m: t["median_us"] for m, t in res.timings.items()}
    assert med == pytest.approx({"original": 45.0, "original_graph": 33.0, "fused": 30.0,
                                 "fused_graph": 28.0})
    assert all(t["runs"] == 6 and len(t["samples_us"]) == 6 for t in res.timings.values())
    assert res.ratios == pytest.approx({
        "speedup_fused_vs_original": 1.5, "speedup_fused_graph_vs_original_graph": 33 / 28,
        "speedup_fused_vs_original_graph": 1.1, "speedup_fused_graph_vs_original": 45 / 28,
        "speedup_original_graph_vs_original": 45 / 33})
    assert res.programs["original"] == {"launches": 3, "memsets": 1, "device_copies": 1,
                                        "syncs": 1, "cooperative_launches": 0}
    assert res.programs["fused"]["launches"] == 1
    # the set-up runs computed the same thing (what the CLI compares)
    assert res.runs["original"].final["z"].tobytes() == res.runs["fused"].final["z"].tobytes()
    doc = json.loads(json.dumps(res.to_json()))
    assert doc["schema"] == "sirius-bench/1" and doc["config"]["input_sets"] == 3
    assert doc["graph_api"] == "fake graphs" and doc["device"]["arch"] == "sm_90"
    assert not drv.mem  # every allocation given back


def _timed_regions(calls: list[tuple]) -> list[list[tuple]]:
    """The calls between each pair of event records (start, end) on the bench stream."""
    out, cur = [], None
    for c in calls:
        if c[0] == "record":
            if cur is None:
                cur = []
            else:
                out.append(cur)
                cur = None
        elif cur is not None:
            cur.append(c)
    return out


def test_flush_rotation_and_syncs() -> None:
    dev, drv = fake()
    runs, warmup, sets = 4, 2, 3
    bench(sides(), BenchConfig(runs=runs, warmup=warmup, input_sets=sets), device=dev)
    start = next(i for i, c in enumerate(drv.calls) if c[0] == "record")
    calls = drv.calls[start - 1:]
    flush = 8 << 20  # twice the fake's 1 MiB L2, at least 8 MiB
    regions = _timed_regions(calls)
    assert len(regions) == 4 * (runs + warmup)
    # a flush memset right before every start event, never inside a timed region
    starts = [i for i, c in enumerate(calls) if c[0] == "record"][::2]
    assert all(calls[i - 1][0] == "memset" and calls[i - 1][3] == flush for i in starts)
    assert not any(c[0] == "memset" and c[3] == flush for r in regions for c in r)
    eager_orig = regions[0::4]
    assert all([c[0] for c in r] == ["memset"] + ["launch"] * 3 + ["stream_synchronize", "dtod"]
               for r in eager_orig)  # program order, the host sync replayed where it was
    # rotation: the x argument of the first launch cycles through the three sets
    xs = [struct.unpack("<Q", r[1][5][:8])[0] for r in eager_orig]
    assert len(set(xs)) == sets and xs == [xs[i % sets] for i in range(len(xs))]
    graphs = [r[0][1] for r in regions[1::4]]
    assert [c[0] for r in regions[1::4] for c in r] == ["graph_launch"] * (runs + warmup)
    assert len(set(graphs)) == sets and graphs == [graphs[i % sets] for i in range(len(graphs))]
    assert len([c for c in drv.calls if c[0] == "graph_free"]) == 2 * sets


def test_without_graph_capture_the_eager_modes_remain() -> None:
    dev, _ = fake(can_capture=False)
    res = bench(sides(), BenchConfig(runs=3, warmup=0, input_sets=1), device=dev)
    assert set(res.timings) == {"original", "fused"}
    assert res.graph_api == "" and any("no CUDA-graph timings" in n for n in res.notes)
    assert res.ratios == pytest.approx({"speedup_fused_vs_original": 1.5})


def test_a_capture_that_fails_half_way_leaves_the_eager_modes() -> None:
    """A launch refused during capture (the fused kernel here) ends that capture; the eager
    modes then run on a fresh stream, and the graphs captured before are given back."""
    dev, drv = fake(capture_fails="axpy3")
    res = bench(sides(), BenchConfig(runs=3, warmup=0, input_sets=1), device=dev)
    assert set(res.timings) == {"original", "fused"} and not drv.capturing
    assert any("cannot be launched while a stream is captured" in n for n in res.notes)
    assert res.ratios == pytest.approx({"speedup_fused_vs_original": 1.5})
    assert len([c for c in drv.calls if c[0] == "graph_free"]) == 1  # the original's


def test_input_sets_shrink_to_fit_memory() -> None:
    per_set = 2 * 3 * 4 * N  # both programs, three buffers each
    dev, _ = fake(free_bytes=int(2.5 * per_set))
    res = bench(sides(), BenchConfig(runs=2, warmup=0, input_sets=4), device=dev)
    assert res.input_sets == 1 and any("1 input set(s) instead of 4" in n for n in res.notes)


def test_bad_configuration() -> None:
    with pytest.raises(GpuError, match="at least 1"):
        BenchConfig(runs=0)


def test_per_launch_times_between_events() -> None:
    """With `per_launch`, the eager runs record an event after every operation: each launch's
    time is 5 us + its kernel's cost, and the whole step keeps its time (memsets, copies and
    syncs cost nothing on the fake clock)."""
    dev, drv = fake()
    res = bench(sides(), BenchConfig(runs=4, warmup=1, input_sets=2, graphs=False,
                                     per_launch=True), device=dev)
    med = {m: t["median_us"] for m, t in res.timings.items()}
    assert med == pytest.approx({"original": 45.0, "fused": 30.0})
    orig = res.launches["original"]
    assert [(x["index"], x["kernel"], x["runs"]) for x in orig] == \
        [(0, "axpy", 4), (1, "axpy", 4), (2, "axpy", 4)]
    assert [x["median_us"] for x in orig] == pytest.approx([15.0, 15.0, 15.0])
    assert [x["median_us"] for x in res.launches["fused"]] == pytest.approx([30.0])
    # an event before the operations and one after each: the original's memset, three
    # launches, sync and copy; the fused program's memset, launch, sync and copy
    records = [c for c in drv.calls if c[0] == "record"]
    assert len(records) == (4 + 1) * ((6 + 1) + (4 + 1))
    doc = res.to_json()
    assert doc["config"]["per_launch"] and len(doc["launch_timings"]["original"]) == 3
    assert not drv.mem
