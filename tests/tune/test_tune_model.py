"""The cost model's arithmetic against hand-computed values (no compilation)."""

from __future__ import annotations

import math

import pytest

from sirius.tune.gpus import GPUS, gpu
from sirius.tune.model import LaunchCounts, Waves, estimate, occupancy


def counts(grid=1, block=256, instructions=0, dram=0, flops=0, regs=32, smem=0):
    return LaunchCounts("k", "_Z1kv", (grid, 1, 1), (block, 1, 1), 0, instructions, dram,
                        (("f32", flops),) if flops else (), regs, smem)


def test_occupancy_h100_256_threads_32_registers():
    # 8 warps per block. Registers: 32 x 32 = 1024 per warp (a multiple of 256); a quarter of
    # the 65536-register file (16384) holds 16 warps, 4 quarters 64 warps = 8 blocks.
    # Threads: 2048 / 256 = 8 blocks. Blocks: 32. So 8 blocks, 64 of 64 warps.
    o = occupancy(gpu("H100 SXM"), 256, 32, 0)
    assert o.warps_per_block == 8
    assert dict(o.limits) == {"threads": 8, "blocks": 32, "registers": 8}
    assert o.blocks_per_sm == 8 and o.fraction == 1.0


def test_occupancy_a100_128_threads_64_registers_48k_shared():
    # 4 warps per block. Registers: 64 x 32 = 2048 per warp; 16384 / 2048 = 8 warps per
    # quarter, 32 warps per SM = 8 blocks. Shared memory: 164 KiB / (48 KiB + 1 KiB reserved)
    # = 167936 / 50176 = 3.35 -> 3 blocks. Threads: 2048 / 128 = 16. So 3 blocks = 12 warps of
    # 64: 18.75 %, limited by shared memory.
    o = occupancy(gpu("A100 SXM 40GB"), 128, 64, 48 * 1024)
    assert dict(o.limits) == {"threads": 16, "blocks": 32, "registers": 8,
                              "shared memory": 3}
    assert o.limiter == "shared memory" and o.blocks_per_sm == 3
    assert o.fraction == pytest.approx(12 / 64)


def test_occupancy_register_rounding_l4():
    # 40 registers x 32 = 1280 per warp, rounded up to 5 x 256 = 1280; 16384 // 1280 = 12 warps
    # per quarter, 48 per SM; 96 threads = 3 warps per block -> 16 blocks by registers;
    # threads: 1536 // 96 = 16; blocks: 24. 16 blocks x 3 warps = 48 of 48 warps.
    o = occupancy(gpu("L4"), 96, 40, 0)
    assert dict(o.limits)["registers"] == 16 and o.blocks_per_sm == 16
    assert o.fraction == 1.0


def test_a_block_that_does_not_fit_cannot_run():
    # 1024 threads x 255 registers: 8192 registers per warp, 2 warps per quarter, 8 per SM,
    # fewer than the block's 32 warps.
    e = estimate(counts(block=1024, regs=255, instructions=10), gpu("V100 SXM2"))
    assert e.occupancy.blocks_per_sm == 0
    assert math.isinf(e.seconds) and "cannot run" in e.explain()


def test_waves_and_tail():
    # 400 blocks of 8 warps, 8 blocks per SM on 132 SMs: 1056 slots, one partial wave on all
    # 132 SMs with 400/132 x 8 = 24.24 warps per SM: full rate for a term that needs 16 warps,
    # 32 / 24.24 = 1.32 times slower for one that needs 32.
    w = Waves(400, 132, 8, 8)
    assert (w.slots, w.full, w.tail, w.count) == (1056, 0, 400, 1)
    assert w.slowdown(16) == pytest.approx(1.0)
    assert w.slowdown(32) == pytest.approx(32 / (400 / 132 * 8))
    # 16 blocks of 8 warps: 16 of 132 SMs, 8 warps each: (132/16) x (16/8) = 16.5
    assert Waves(16, 132, 8, 8).slowdown(16) == pytest.approx(16.5)
    # 3 full waves and a tail of 10 blocks on 10 SMs, one block each
    w = Waves(3 * 1056 + 10, 132, 8, 8)
    full_share, tail_share = 3 * 1056 / w.blocks, 10 / w.blocks
    assert w.slowdown(16) == pytest.approx(full_share / 1.0 + tail_share / (10 / 132 * 8 / 16))


def test_dram_term_by_hand():
    # one full wave (132 SMs x 8 blocks of 256 threads), 3.35 MB: 3.35e6 / 3.35e12 = 1 us at
    # full rate; 64 warps per SM >= 32 needed: no slowdown; 3 us launch.
    g = gpu("H100 SXM")
    e = estimate(counts(grid=132 * 8, dram=3_350_000), g)
    assert e.dram == pytest.approx(1e-6)
    assert e.seconds == pytest.approx(4e-6)
    assert e.bound == "launch" and e.body_bound == "dram"


@pytest.mark.parametrize("kw, bound, text", [
    (dict(grid=132 * 8, dram=100_000_000), "dram", "DRAM-bound"),
    (dict(grid=132 * 8, instructions=10**9), "issue", "issue-bound"),
    (dict(grid=132 * 8, instructions=10**7, flops=10**9), "compute", "compute-bound"),
    (dict(grid=4, block=64, instructions=1000, dram=4096), "launch", "launch-bound"),
])
def test_the_bound_is_named(kw, bound, text):
    e = estimate(counts(**kw), gpu("H100 SXM"))
    assert e.bound == bound
    line = e.explain()
    assert line.startswith(text) and line.endswith("[estimate]")
    assert f"of {e.seconds * 1e6:.3g} us" in line


def test_every_gpu_has_sources_and_consistent_peaks():
    for g in GPUS.values():
        src = dict(g.sources)
        assert "launch_us" in src and "assumption" in src["launch_us"]
        assert "per-SM limits" in src
        lanes = 64 if g.arch in ("sm_70", "sm_80") else 128
        # peak FP32 = SMs x lanes x 2 x clock, within 3 % (the figures are rounded)
        assert g.fp32_tflops * 1e12 == pytest.approx(g.sms * lanes * 2 * g.clock_hz, rel=0.03)
    assert gpu("h100") is GPUS["H100 SXM"] and gpu("a100-40gb").dram_gbps == 1555


def test_a_megakernel_is_estimated_segment_by_segment_with_its_syncs():
    """Two segments, one memory-bound and one issue-bound, on the grid of the H100's 132 SMs
    (one block of 256 threads each): the estimate adds each segment's own bound, not the
    largest of the summed terms, plus one synchronisation between them; a grid barrier costs
    `grid_sync_us`, a dependence wait `wait_us`, and the report names the term."""
    import dataclasses

    from sirius.tune.model import Assumptions, Segment

    h = gpu("H100 SXM")
    mem = Segment(1000, 330_000_000)   # 330 MB: DRAM-bound
    alu = Segment(2_000_000_000, 1000)  # 2 G instructions: issue-bound
    base = dataclasses.replace(counts(grid=132, instructions=mem.instructions + alu.instructions,
                                      dram=mem.dram_bytes + alu.dram_bytes),
                               sync="grid", segments=(mem, alu))
    one = [estimate(dataclasses.replace(counts(grid=132, instructions=g.instructions,
                                               dram=g.dram_bytes)), h) for g in (mem, alu)]
    e = estimate(base, h)
    assert e.sync == pytest.approx(Assumptions().grid_sync_us * 1e-6)
    assert e.seconds == pytest.approx(h.launch_us * 1e-6 + one[0].body + one[1].body + e.sync)
    assert e.seconds > h.launch_us * 1e-6 + max(e.dram, e.issue) + e.sync  # not overlapped
    waits = estimate(dataclasses.replace(base, sync="counters"), h)
    assert waits.sync == pytest.approx(Assumptions().wait_us * 1e-6)
    tiny = estimate(dataclasses.replace(counts(grid=132, instructions=200, dram=200),
                                        sync="grid", segments=(Segment(10, 10),) * 20), h)
    assert tiny.bound == "sync" and tiny.explain().startswith("sync-bound")
    assert any("megakernel (grid): 20 segments" in n for n in tiny.notes)
    # a device loop of 100 iterations: a grid barrier between every two of the 200 segment
    # runs (the executor's segment counts are summed over the iterations already); with
    # counters, waits, the first segment's on the iteration before
    a = Assumptions()
    looped = estimate(dataclasses.replace(base, iterations=100), h)
    assert looped.sync == pytest.approx(199 * a.grid_sync_us * 1e-6)
    assert any("device loop of 100 iterations" in n for n in looped.notes)
    looped = estimate(dataclasses.replace(base, iterations=100, sync="counters"), h)
    assert looped.sync == pytest.approx(199 * a.wait_us * 1e-6)


def test_a_megakernel_segment_is_as_parallel_as_the_blocks_it_gives_work_to():
    """A segment whose members need 8 blocks keeps 8 blocks of a 132-block megakernel busy:
    it is estimated like a launch of 8 blocks (its own partial wave), not spread over the whole
    grid, and the estimate never favours the megakernel over the same work as a launch of
    its own (launch overhead aside). A segment with unknown blocks takes the grid's waves."""
    import dataclasses

    from sirius.tune.model import LaunchCounts, Segment

    h = gpu("H100 SXM")
    work = Segment(50_000_000, 1000, (), 8)
    mk = dataclasses.replace(counts(grid=132, instructions=work.instructions, dram=1000),
                             sync="grid", segments=(work,))
    alone = estimate(counts(grid=8, instructions=work.instructions, dram=1000), h)
    e = estimate(mk, h)
    assert e.issue == pytest.approx(alone.issue)
    assert e.body == pytest.approx(alone.body)
    spread = estimate(dataclasses.replace(mk, segments=(dataclasses.replace(work, blocks=None),)),
                      h)
    assert spread.issue < e.issue / 10  # the old (optimistic) reading: all 132 blocks busy
    # more blocks than the grid: the grid's waves (a block-stride loop)
    big = estimate(dataclasses.replace(mk, segments=(dataclasses.replace(work, blocks=1000),)), h)
    assert big.issue == pytest.approx(spread.issue)
    # a segment whose members use 128 of the block's 1024 threads: 4 warps work per block
    wide = dataclasses.replace(mk, block=(1024, 1, 1),
                               segments=(dataclasses.replace(work, threads=128),))
    narrow = estimate(counts(grid=8, block=128, instructions=work.instructions, dram=1000), h)
    assert estimate(wide, h).issue == pytest.approx(narrow.issue)
    assert estimate(dataclasses.replace(wide, segments=(work,)), h).issue < narrow.issue / 2
    # blocks and threads survive tune.json / RUNS.json
    d = wide.to_json()
    assert d["segments"][0]["blocks"] == 8 and d["segments"][0]["threads"] == 128
    back = LaunchCounts.from_json(d, "test").segments[0]
    assert (back.blocks, back.threads) == (8, 128)


def test_the_h200_entry_agrees_with_the_h200_measured_here():
    """docs/measurements/h200-2026-11-29: the device reported 132 SMs, a 60 MiB L2 and a
    227 KiB opt-in shared memory per block, nvidia-smi a 1980 MHz maximum SM clock."""
    import csv
    import json
    from pathlib import Path

    d = Path(__file__).resolve().parents[2] / "docs" / "measurements" / "h200-2026-11-29"
    docs = [json.loads(p.read_text()) for p in sorted((d / "graphs").glob("*.json"))]
    devices = {json.dumps(doc["bench"]["device"], sort_keys=True)
               for doc in docs if (doc.get("bench") or {}).get("device")}
    assert len(devices) == 1  # one device
    dev = json.loads(devices.pop())
    (smi,) = csv.DictReader((d / "smi.csv").read_text().splitlines(), skipinitialspace=True)
    h200 = gpu("h200")
    assert dev["name"] == "NVIDIA H200" and h200.l2_bytes == dev["l2_bytes"] == 62914560
    assert h200.sms == dev["multiprocessors"]
    assert h200.smem_per_block == dev["max_smem_per_block_optin"]
    assert f"{h200.boost_mhz:g} MHz" == smi["clocks.max.sm [MHz]"]
    assert "read from the device (cudaDevAttrL2CacheSize" in dict(h200.sources)["l2_bytes"]
    assert "2026-11-29" in dict(h200.sources)["l2_bytes"]
