"""Barrier kernels as work-item loops (sirius/runtime/cpu/wiloop.py): values live across
barriers, barriers in loops and under uniform and thread-dependent branches, checked against
numpy in every order, and against the fiber path (`CpuDevice(loops=False)`): the same outputs
and the same counters; warp operations (shuffles, votes, activemask, divergent lanes) as work-item
loops too, the same as on fibers; a divergent barrier is the same fault."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.device import KernelFault
from sirius.runtime.interpreter import run_host_program
from tests.runtime.execsupport import analysed, run

ORDERS = ("forward", "reverse", "random:5")
PROGRAM = "programs/barrier_live.cu"
B, NB = 64, 3


def both(name: str, order: str, inputs: dict | None = None):
    """(fibers run, loops run) of a program, same seed and order."""
    program, kernels, host = analysed(name)
    return tuple(run_host_program(host, program, kernels, CpuDevice(order=order, loops=loops),
                                  seed=3, inputs=inputs, order=order)
                 for loops in (False, True))


def counters(r) -> list[tuple]:
    return [tuple(v for k, v in dataclasses.asdict(x.stats).items()
                  if k not in ("seconds", "mode")) for x in r.launches]


def reference(x: np.ndarray, steps: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs = x.reshape(NB, B).astype(np.int64)
    v = xs.copy()
    loc = np.tile(np.arange(4), (NB, B, 1))
    for k in range(steps):  # x = s[(t + k + 1) % B] + 3x; loc[k % 4] += x
        v = np.roll(v, -(k + 1), axis=1) + 3 * v
        loc[:, :, k & 3] += v
    v = v - v[:, ::-1]  # the barrier under `if (flag)`
    a = v + 10 * loc.sum(axis=2)
    t = np.arange(B)
    s = np.where(t % 2 == 1, xs + 1, 2 * xs)
    b = np.where(t % 2 == 1, 5 * s[:, t ^ 1], s[:, t ^ 1] - 7)
    r = xs[:, ::-1]
    c = r + r[:, t ^ 1]
    return tuple(y.reshape(-1).astype(np.int32) for y in (a, b, c))


@pytest.mark.parametrize("order", ORDERS)
def test_live_values_and_branches_against_numpy(order):
    x = np.random.default_rng(11).integers(-60, 60, NB * B).astype(np.int32)
    fibers, loops = both(PROGRAM, order, {"d_in": x})
    assert [s.stats.mode for s in loops.launches] == ["loops", "loops", "loops"]
    assert [s.stats.mode for s in fibers.launches] == ["fibers"] * 3
    a, b, c = reference(x)
    assert loops.final["d_a"].tolist() == a.tolist()
    assert loops.final["d_b"].tolist() == b.tolist()
    assert loops.final["d_c"].tolist() == c.tolist()
    # barriers per block: 2 per step of the loop (5 steps) + the one under `if (flag)`
    assert loops.launches[0].stats.barriers == NB * 11
    assert loops.launches[1].stats.barriers == NB * 1
    assert counters(loops) == counters(fibers)
    for k in fibers.final:
        assert np.array_equal(fibers.final[k], loops.final[k]), k


@pytest.mark.parametrize("name", ["lstm_cell.cu", "matmul_bias_act.cu",
                                  "transpose_elementwise.cu", "programs/barrier_loop.cu"])
def test_corpus_barrier_programs_same_as_fibers(name):
    for order in ("forward", "random:2"):
        fibers, loops = both(name, order)
        assert "loops" in {s.stats.mode for s in loops.launches}, name
        assert counters(loops) == counters(fibers), (name, order)
        for k in fibers.final:  # racy programs included: the same schedule, the same bytes
            assert np.array_equal(fibers.final[k], loops.final[k], equal_nan=True), (name, k)


@pytest.mark.parametrize("name", ["block_reduce.cu", "programs/warp_shuffle.cu",
                                  "programs/warp_vote.cu", "programs/warp_divergent.cu",
                                  "programs/fp16_ops.cu"])
def test_warp_programs_same_as_fibers(name):
    """Kernels with warp operations run as work-item loops (the continuation stops at each
    warp operation; the runtime completes it for the warp): the same bytes and counters as the
    fiber scheduler, converged warps and divergent ones, in every order."""
    for order in ORDERS:
        fibers, loops = both(name, order)
        assert [s.stats.mode for s in fibers.launches if s.stats.mode != "fast"] and \
            all(s.stats.mode in ("fibers", "fast") for s in fibers.launches), name
        assert "loops" in {s.stats.mode for s in loops.launches}, name
        assert counters(loops) == counters(fibers), (name, order)
        for k in fibers.final:
            assert np.array_equal(fibers.final[k], loops.final[k], equal_nan=True), (name, k)


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_divergent_barrier_same_fault_as_fibers(order):
    program, kernels, host = analysed("programs/divergent_barrier.cu")
    messages = []
    for loops in (False, True):
        with pytest.raises(KernelFault) as e:
            run_host_program(host, program, kernels, CpuDevice(order=order, loops=loops),
                             seed=0, order=order)
        messages.append(e.value.message)
    assert messages[0] == messages[1]
    assert "16 of 64 threads wait at the barrier" in messages[1]


def test_bounds_checks_see_local_arrays_in_frames():
    # the volatile local array lives in the thread's frame: checked accesses to it are fine
    r = run(PROGRAM, check_bounds=True)
    assert [s.stats.mode for s in r.launches] == ["loops", "loops", "loops"]
    assert r.final["d_a"].tolist() == reference(r.initial["d_in"])[0].tolist()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_random_order_is_the_fiber_schedulers_even_where_a_race_shows_it(seed):
    # race_threads.cu reads a neighbour's shared element without a barrier: what each thread
    # sees depends on the order of the threads in the round after the barrier, which follows
    # the fiber scheduler's empty round (a draw nobody reads: skipped by the loops, with the
    # random state advanced as the draw would have, sirius_rt.c skip_order)
    order = f"random:{seed}"
    fib, loops = both("programs/race_threads.cu", order)
    assert fib.final["d_out"].tolist() == loops.final["d_out"].tolist()
    assert len(set(fib.final["d_out"].tolist())) > 2  # a real mix of orders, not all -1


@pytest.mark.parametrize("name", ["block_reduce.cu", "programs/warp_divergent.cu",
                                  "programs/warp_shuffle.cu", "programs/warp_lane_order.cu"])
def test_the_block_loops_copies_per_warp_resume_change_nothing(name, monkeypatch):
    """The block loop has a copy for each state a thread resumes from after a warp operation
    (entries.block_wrapper), which the runtime picks when every lane resumes from there, and
    completes a full warp's shuffle with constant operands itself (forward and reverse orders);
    without the copies every thread dispatches on its own state and the runtime completes every
    warp operation: the same bytes and counters, in every order. warp_lane_order.cu races on
    purpose: its output shows the lanes' order at each step, which must be the same too."""
    from sirius.runtime.cpu import device, entries, jit

    program, kernels, host = analysed(name)

    def go(order):
        return run_host_program(host, program, kernels, CpuDevice(order=order), seed=3,
                                order=order)

    def block_loops() -> list[str]:
        (jm,) = [m for m in device._MODULES.values() if m.host.text.count("@__sirius_lanes_")]
        return [ln for ln in jm.host.text.splitlines() if "switch i32 %uniform" in ln]

    monkeypatch.setattr(device, "_MODULES", {})
    copies = {o: go(o) for o in ORDERS}
    assert any("label %u" in ln for ln in block_loops()), name
    if name != "programs/warp_divergent.cu":  # shuffles with constant operands
        (jm,) = [m for m in device._MODULES.values() if m.host.text.count("@__sirius_lanes_")]
        assert "label %x" in jm.host.text, name
    monkeypatch.setattr(entries, "UNIFORM_STATES_MAX", 0)
    monkeypatch.setattr(jit, "_rewrite_digest", lambda: "no copies per warp resume")
    monkeypatch.setattr(device, "_MODULES", {})
    for order in ORDERS:
        plain = go(order)
        assert counters(plain) == counters(copies[order]), (name, order)
        for k in plain.final:
            assert np.array_equal(plain.final[k], copies[order].final[k], equal_nan=True)
    assert not any("label %u" in ln for ln in block_loops()), name


def _warp_chain_reference(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """programs/warp_chain.cu's first launch (full warps) on inputs x (float) and y (int),
    with CUDA's shuffle rules written out for numpy (not the executor's code): down/up stay
    inside their width's segment, xor below the width does, idx takes lane k of the
    segment."""
    f32 = np.float32
    v, a = x.reshape(-1, 32), y.reshape(-1, 32)
    lane = np.arange(32)

    def down(x, d, w=32):
        return x[:, np.where(lane % w + d < w, lane + d, lane)]

    def up(x, d, w=32):
        return x[:, np.where(lane % w >= d, lane - d, lane)]

    def xor(x, k):
        return x[:, lane ^ k]

    def idx(x, k, w=32):
        return x[:, (lane // w) * w + k % w]

    s = v + down(v, 16)
    s = s * f32(0.75) - xor(s, 8)
    s = s + up(s, 3)
    s = np.where(s < f32(4.0), s * f32(2.0), s - f32(1.0))
    s = s - idx(s, 5)
    b = a ^ xor(a, 1)
    b = b + down(b, 2, 8)
    b = (b << 1) | 1  # activemask of a full warp: bit 31 set
    c = up(b * 3, 4, 8)
    c = np.maximum(c, idx(c, 6, 16))
    return (s + c.astype(f32) + v).reshape(-1), (b + c + a).reshape(-1)


def test_lane_chains_compute_the_shuffles_and_change_nothing(monkeypatch):
    """A full warp's pure steps between shuffles run as one lane chain (lanechain.py): the
    values CUDA's rules give (numpy), in every order, and the same bytes and counters as lane by
    lane (chains off); a launch with a 16-lane warp runs lane by lane either way."""
    from sirius.runtime.cpu import device, jit, lanechain

    name = "programs/warp_chain.cu"
    program, kernels, host = analysed(name)

    rng = np.random.default_rng(5)
    inputs = {"d_in": rng.uniform(-6, 6, 256).astype(np.float32),
              "d_iv": rng.integers(-1000, 1000, 256).astype(np.int32)}

    def go(order):
        return run_host_program(host, program, kernels, CpuDevice(order=order), seed=3,
                                inputs=inputs, order=order)

    def chain_functions() -> int:
        (jm,) = [m for m in device._MODULES.values() if m.host.text.count("@__sirius_lanes_")]
        return jm.host.text.count("define internal i32 @__sirius_vchain_")

    monkeypatch.setattr(device, "_MODULES", {})
    chained = {o: go(o) for o in ORDERS}
    assert chain_functions() == 1
    ref_f, ref_i = _warp_chain_reference(inputs["d_in"], inputs["d_iv"])
    for order, r in chained.items():
        assert r.final["d_outf"].tolist() == ref_f.tolist(), order
        assert r.final["d_outi"].tolist() == ref_i.tolist(), order
        assert set(r.final["d_outm"].tolist()) == {0xFFFFFFFF}
        tail = r.final["d_outm2"][:96].reshape(2, 48)[:, 32:]
        assert set(tail.reshape(-1).tolist()) == {0xFFFF}, order  # the 16-lane warps
    monkeypatch.setattr(lanechain, "MAX_LINES", 0)
    monkeypatch.setattr(jit, "_rewrite_digest", lambda: "no lane chains")
    monkeypatch.setattr(device, "_MODULES", {})
    for order in ORDERS:
        plain = go(order)
        assert counters(plain) == counters(chained[order]), order
        for k in plain.final:
            assert np.array_equal(plain.final[k], chained[order].final[k], equal_nan=True), k
    assert chain_functions() == 0
