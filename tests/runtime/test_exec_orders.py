"""Schedules and counters.

Every corpus program is race-free, so the order of blocks and of threads between barriers
(forward, reverse, random:SEED) must not change any result: bit for bit, since each output
element is computed by one thread along one fixed sequence of float operations (sums in a fixed
tree or loop order, the histogram's integer atomics commute). Float atomics would be the
exception: atomicAdd of floats rounds after every addition, so the order the additions happen in
can change the last bits (tests/runtime/test_exec_features.py::test_float_atomic_add_random_data);
no corpus program has them.

Counters are exact counts of what the threads did, so they must be the same in every run and,
for these race-free programs, in every order. For some launches they are derived by hand here.
"""

from __future__ import annotations

import numpy as np
import pytest

from sirius.frontend import compile_program
from sirius.runtime.interpreter import run_program
from tests.runtime.execsupport import KERNELS, counters, ir_block_sizes, run, run_cached

CORPUS = sorted(p.name for p in KERNELS.glob("*.cu"))
SEED = 11


def assert_same_results(a, b, what: str) -> None:
    assert a.final.keys() == b.final.keys()
    for name in a.final:
        assert a.final[name].tobytes() == b.final[name].tobytes(), f"{what}: {name} differs"


@pytest.mark.parametrize("program", CORPUS)
def test_orders_agree_bitwise(program):
    base = run_cached(program, SEED, "forward")
    for order in ("reverse", "random:7"):
        other = run_cached(program, SEED, order)
        assert_same_results(base, other, f"forward vs {order}")
        assert [counters(x.stats) for x in base.launches] == \
            [counters(x.stats) for x in other.launches], f"counters forward vs {order}"


@pytest.mark.parametrize("program", CORPUS)
def test_runs_are_reproducible(program):
    a = run(program, seed=SEED)
    b = run(program, seed=SEED)
    assert_same_results(a, b, "two runs")
    assert [counters(x.stats) for x in a.launches] == [counters(x.stats) for x in b.launches]
    assert all(x.stats.seconds >= 0 for x in a.launches)


def test_helper_runs_like_run_program():
    # the tests run programs through execsupport.run (analysis cached); the public entry point
    # must give the same buffers and counters
    a = run_program([KERNELS / "block_reduce.cu"], seed=SEED, order="reverse")
    b = run("block_reduce.cu", seed=SEED, order="reverse")
    assert_same_results(a, b, "run_program vs run")
    assert {k: v.tobytes() for k, v in a.initial.items()} == \
        {k: v.tobytes() for k, v in b.initial.items()}
    assert [counters(x.stats) for x in a.launches] == [counters(x.stats) for x in b.launches]


def test_elementwise_chain_counters():
    r = run_cached("elementwise_chain.cu", SEED, "forward")
    F, N = 4, 4096
    got = {x.stats.kernel: x.stats for x in r.launches}
    assert list(got) == ["scale", "add_bias", "relu", "square"]
    # (threads launched, loads and stores per in-bounds thread); every kernel guards i < n
    shape = {"scale": (32 * 128, 1, 1), "add_bias": (16 * 256, 2, 1), "relu": (64 * 64, 1, 1),
             "square": (43 * 96, 1, 1)}
    for k, (_, loads, stores) in shape.items():
        s = got[k]
        assert (s.global_load_bytes, s.global_store_bytes) == (N * loads * F, N * stores * F), k
        assert (s.shared_load_bytes, s.shared_store_bytes, s.barriers) == (0, 0, 0), k
        assert s.mode == "fast" and s.smem == 0
    # Instructions: each kernel is `entry: ... br (i < n)`, `if.then: ... br`, `if.end: ret`;
    # in-bounds threads execute all three blocks, the 32 idle threads of square's last block
    # only entry and if.end. Block sizes are read off the device IR.
    ir = compile_program([KERNELS / "elementwise_chain.cu"]).device_ir
    for k, (threads, _, _) in shape.items():
        sizes = ir_block_sizes(ir, k)
        assert set(sizes) == {"entry", "if.then", "if.end"}, sizes
        idle = threads - N
        expected = N * sum(sizes.values()) + idle * (sizes["entry"] + sizes["if.end"])
        assert got[k].instructions == expected, k


def test_block_reduce_counters():
    r = run_cached("block_reduce.cu", SEED, "forward")
    first, second = (x.stats for x in r.launches)
    # pass 1: threads i < 20000 load one float each; each of the 79 blocks stores one partial
    # and passes its single __syncthreads once (a barrier counts once per block)
    assert (first.global_load_bytes, first.global_store_bytes, first.barriers) == \
        (20000 * 4, 79 * 4, 79)
    # pass 2: one block of 128 threads, 79 of which load a partial
    assert (second.global_load_bytes, second.global_store_bytes, second.barriers) == \
        (79 * 4, 4, 1)
    assert first.mode == second.mode == "loops"
    # lane 0 of each warp stores its warp's sum into the shared array
    assert first.shared_store_bytes == 79 * (256 // 32) * 4
    assert second.shared_store_bytes == 128 // 32 * 4


def test_matmul_counters():
    r = run_cached("matmul_bias_act.cu", SEED, "forward")
    mm, bias, act = (x.stats for x in r.launches)
    blocks, threads, steps = 16, 256, 4  # grid 4x4, block 16x16, k / TILE = 4 tile steps
    # per thread and step: one A and one B element from global into shared, then 16 pairs
    # As[ty][i], Bs[i][tx] read from shared; two barriers per step
    assert mm.global_load_bytes == blocks * threads * steps * 2 * 4
    assert mm.shared_store_bytes == blocks * threads * steps * 2 * 4
    assert mm.shared_load_bytes == blocks * threads * steps * 16 * 2 * 4
    assert mm.global_store_bytes == 64 * 64 * 4
    assert mm.barriers == blocks * steps * 2
    # bias_add reads C and bias, writes C; act_tanh reads C, writes out
    assert (bias.global_load_bytes, bias.global_store_bytes) == (2 * 4096 * 4, 4096 * 4)
    assert (act.global_load_bytes, act.global_store_bytes) == (4096 * 4, 4096 * 4)
    assert bias.barriers == act.barriers == 0


def test_histogram_counters():
    s = run_cached("histogram_atomics.cu", SEED, "forward").launches[0].stats
    blocks, bins, n = 8, 64, 8192
    # An atomic read-modify-write counts its bytes once as a load and once as a store.
    # global: every element read once; every block adds its 64 bins into hist
    assert s.global_load_bytes == n * 4 + blocks * bins * 4
    assert s.global_store_bytes == blocks * bins * 4
    # shared: 64 zeroing stores per block, one atomic per element, 64 reads of the bins
    assert s.shared_store_bytes == blocks * bins * 4 + n * 4
    assert s.shared_load_bytes == n * 4 + blocks * bins * 4
    assert s.barriers == blocks * 2  # two __syncthreads per block
    assert s.mode == "loops"


def test_transpose_counters():
    t, ss = (x.stats for x in run_cached("transpose_elementwise.cu", SEED, "forward").launches)
    # 128 x 64 floats through a 32 x 33 shared tile: each element loaded from global once,
    # stored to and loaded from shared once, stored to global once; one barrier in 8 blocks
    assert (t.global_load_bytes, t.shared_store_bytes, t.shared_load_bytes,
            t.global_store_bytes, t.barriers) == (32768, 32768, 32768, 32768, 8)
    assert (ss.global_load_bytes, ss.global_store_bytes, ss.barriers) == (32768, 32768, 0)


def test_lstm_barriers():
    r = run_cached("lstm_cell.cu", SEED, "forward")
    assert [x.stats.barriers for x in r.launches] == [2] * 8  # 2 blocks, one barrier, 8 cells
    assert {x.stats.grid for x in r.launches} == {(2, 1, 1)}


def test_seeds_change_data_not_counts_of_data_independent_programs():
    a = run_cached("elementwise_chain.cu", 11, "forward")
    b = run_cached("elementwise_chain.cu", 12, "forward")
    assert not np.array_equal(a.final["d_out"], b.final["d_out"])
    # relu is fmaxf (no branch): the paths do not depend on the data
    assert [counters(x.stats) for x in a.launches] == [counters(x.stats) for x in b.launches]
