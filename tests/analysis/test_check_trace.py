"""check_trace: dynamic accesses against the static relations.

Synthetic traces are written by hand from the kernels' source (what each thread must touch),
then spoiled by one record to see it reported. (tests/test_soundness.py runs the CPU executor's
trace mode on every corpus program against the same checker.)
"""

from __future__ import annotations

import time

import numpy as np

from sirius.analysis.uar.soundness import RECORD_DTYPE, LaunchTrace, check_trace
from tests.analysis.support import uar_of

LOAD, STORE, ATOMIC = 0, 1, 2
GLOBAL, SHARED = 0, 1


def records(rows: list[tuple]) -> np.ndarray:
    return np.array(rows, dtype=RECORD_DTYPE)


def buffer_ids(program: str) -> dict[str, int]:
    return {b.name: b.id for b in uar_of(program).program.buffers}


def scale_trace() -> np.ndarray:
    """elementwise_chain's scale<<<32, 128>>>(x, y, 0.5, 4096): thread i = 128 bx + tx loads
    x[i] and stores y[i] (4 bytes each)."""
    ids = buffer_ids("elementwise_chain.cu")
    bx, tx = np.divmod(np.arange(4096), 128)
    out = np.zeros(2 * 4096, dtype=RECORD_DTYPE)
    for k, (name, kind) in enumerate((("d_x", LOAD), ("d_y", STORE))):
        part = out[k::2]
        part["bx"], part["tx"] = bx, tx
        part["space"], part["buffer"], part["kind"] = GLOBAL, ids[name], kind
        part["offset"], part["size"] = 4 * (128 * bx + tx), 4
    return out


def test_elementwise_trace_is_inside():
    rep = check_trace(uar_of("elementwise_chain.cu"), [LaunchTrace(0, {}, scale_trace())])
    assert rep.ok and rep.records == 8192 and rep.launches == 1
    assert (rep.exact_accesses, rep.static_accesses) == (9, 9)


def test_a_store_to_the_neighbour_is_reported():
    ids = buffer_ids("elementwise_chain.cu")
    bad = records([(0, 0, 0, 5, 0, 0, GLOBAL, ids["d_y"], 24, 4, STORE)])  # thread 5 -> y[6]
    rep = check_trace(uar_of("elementwise_chain.cu"),
                      [LaunchTrace(0, {}, np.concatenate([scale_trace(), bad]))])
    assert rep.violation_count == 1
    v = rep.violations[0]
    assert (v.kernel, v.block, v.thread, v.buffer, v.offset, v.kind) == (
        "scale", (0, 0, 0), (5, 0, 0), "d_y", 24, "store")
    # a load of y is no access of scale at all, and an 8-byte store of y[4095..4096] spills
    other = records([(0, 0, 0, 0, 0, 0, GLOBAL, ids["d_y"], 0, 4, LOAD),
                     (31, 0, 0, 127, 0, 0, GLOBAL, ids["d_y"], 16380, 8, STORE)])
    assert check_trace(uar_of("elementwise_chain.cu"),
                       [LaunchTrace(0, {}, other)]).violation_count == 2


def lstm_rows(layer: int, t: int, shift: int = 0) -> list[tuple]:
    """lstm_cell<<<2, 32>>> of cell (l, t): every thread tx stages k = tx and tx + 32 of x and
    h_prev into s_x[k], s_h[k] (shared arrays 0 and 1); x = d_h + (5l + t + 1) * 256 bytes,
    h_prev = d_h + (5(l + 1) + t) * 256 bytes (the host model's byte offsets)."""
    ids = buffer_ids("lstm_cell.cu")
    x_off, h_off = (5 * layer + t + 1) * 256, (5 * (layer + 1) + t) * 256
    rows = []
    for bx in range(2):
        for tx in range(32):
            for k in (tx, tx + 32):
                rows += [(bx, 0, 0, tx, 0, 0, GLOBAL, ids["d_h"], x_off + 4 * k + shift, 4, LOAD),
                         (bx, 0, 0, tx, 0, 0, SHARED, 0, 4 * k, 4, STORE),
                         (bx, 0, 0, tx, 0, 0, GLOBAL, ids["d_h"], h_off + 4 * k, 4, LOAD),
                         (bx, 0, 0, tx, 0, 0, SHARED, 1, 4 * k, 4, STORE)]
    return rows


def test_lstm_trace_in_a_host_loop():
    u = uar_of("lstm_cell.cu")
    good = [LaunchTrace(0, {"l": layer, "t": t}, records(lstm_rows(layer, t)))
            for layer in range(2) for t in range(4)]
    assert check_trace(u, good).ok
    # the accesses of cell (1, 2) checked as if they were cell (1, 3): x moved by 256 bytes
    wrong_env = LaunchTrace(0, {"l": 1, "t": 3}, records(lstm_rows(1, 2)))
    assert check_trace(u, [wrong_env]).violation_count == 2 * 32 * 2 * 2
    # one element past x for every staging load
    shifted = LaunchTrace(0, {"l": 0, "t": 0}, records(lstm_rows(0, 0, shift=256)))
    rep = check_trace(u, [shifted])
    assert rep.violation_count == 128 and rep.per_launch == {0: 128}


def test_histogram_atomics_anywhere_in_the_shared_array():
    u = uar_of("histogram_atomics.cu")
    ids = buffer_ids("histogram_atomics.cu")
    # atomicAdd(&s_hist[data[i] % 64]): the static relation is the whole array (64 x 4 bytes)
    rows = [(0, 0, 0, tx, 0, 0, SHARED, 0, 4 * (tx * 37 % 64), 4, ATOMIC) for tx in range(256)]
    rows += [(b, 0, 0, tx, 0, 0, GLOBAL, ids["d_hist"], 4 * tx, 4, ATOMIC)
             for b in range(8) for tx in range(64)]
    assert check_trace(u, [LaunchTrace(0, {}, records(rows))]).ok
    past = records([(0, 0, 0, 3, 0, 0, SHARED, 0, 256, 4, ATOMIC)])
    assert check_trace(u, [LaunchTrace(0, {}, past)]).violation_count == 1
    # only threads tx < 64 add their bin into the global histogram
    late = records([(0, 0, 0, 64, 0, 0, GLOBAL, ids["d_hist"], 0, 4, ATOMIC)])
    assert check_trace(u, [LaunchTrace(0, {}, late)]).violation_count == 1


def test_shared_arrays_named_by_the_trace():
    # a trace may number shared arrays in its own order and name them: map by name
    u = uar_of("lstm_cell.cu")
    ir = u.launch_effects[0].summary.shared_globals
    rows = records(lstm_rows(0, 0))
    swapped = rows.copy()
    shared = swapped["space"] == SHARED
    swapped["buffer"][shared] = 1 - swapped["buffer"][shared]
    named = LaunchTrace(0, {"l": 0, "t": 0}, swapped, shared=(ir[1], ir[0], "extern"))
    assert check_trace(u, [named]).ok


def test_a_million_records_in_seconds():
    trace = np.concatenate([scale_trace()] * 128)  # 1,048,576 records
    t0 = time.perf_counter()
    rep = check_trace(uar_of("elementwise_chain.cu"), [LaunchTrace(0, {}, trace)])
    assert rep.ok and rep.records == len(trace)
    assert time.perf_counter() - t0 < 10
