"""Device state of the CPU executor: module globals (`__device__`, `__constant__`) start from
their initializers in every run, the bounds checker knows them by name, traces name them, and
block orders hold for grids too big for a table of blocks."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.device import KernelFault
from sirius.runtime.interpreter import HostInterpreter, run_host_program
from tests.runtime.execsupport import analysed, run

F32 = np.float32
ORDERS = ("forward", "reverse", "random:5")


# ---- fresh globals in every run ----------------------------------------------------------------
def test_device_counter_is_the_same_in_successive_runs():
    # 2 blocks x 64 threads each add 1 to `counter` (0) and thread 0 of each block adds 10 to
    # `total` (5); the __constant__ table 1..8 sums to 36. Before globals were reset, the
    # second run in a process saw counter = 256, total = 45.
    for _ in range(3):
        r = run("programs/device_counter.cu")
        assert r.final["d_out"].tolist() == [128, 25, 36]
        # the tickets atomicAdd handed out: each of 0..127 once, in this run
        assert sorted(r.final["d_seen"].tolist()) == list(range(128))


def test_verify_style_runs_see_identical_state():
    # What verify does: one compiled module, a fresh CpuDevice per order, one run each.
    program, kernels, host = analysed("programs/device_counter.cu")
    outs = []
    for order in ("forward", *ORDERS):
        dev = CpuDevice(order=order, seed=7, check_bounds=order != "forward")
        r = run_host_program(host, program, kernels, dev, seed=7, order=order)
        outs.append(r.final["d_out"].tolist())
        # one block after the other: each block's tickets are 64 consecutive numbers
        seen = r.final["d_seen"].reshape(2, 64)
        assert sorted(seen[0] // 64) == [seen[0, 0] // 64] * 64, order
    assert outs == [[128, 25, 36]] * 4


def test_load_module_restores_the_initializers():
    program, kernels, host = analysed("programs/device_counter.cu")
    dev = CpuDevice()
    # the module run_host_program loads: the same program size picks the same compile level
    size = host.data_bytes()
    jm = dev.load_module(program, size).handle

    def values() -> dict[str, list[int]]:
        (engine,) = jm.engines(1)
        return {g.label: np.frombuffer(ctypes.string_at(a, g.bytes), np.int32).tolist()
                for a, g in zip(engine.globals, jm.host.globals, strict=True)}

    run_host_program(host, program, kernels, dev)
    assert values() == {"counter": [128], "total": [25], "table": [1, 2, 3, 4, 5, 6, 7, 8]}
    dev.load_module(program, size)  # the start of a new run
    assert values() == {"counter": [0], "total": [5], "table": [1, 2, 3, 4, 5, 6, 7, 8]}


# ---- module globals and the bounds checker -----------------------------------------------------
@pytest.mark.parametrize("order", ORDERS)
def test_device_array_passes_the_bounds_checker(order):
    # scatter: g[(i + 1000) % N] = 2 x[i]; gather: out[i] = g[i] + 1 (N = 4096)
    x = np.random.default_rng(3).uniform(-1, 1, 4096).astype(F32)
    r = run("programs/device_array.cu", order=order, check_bounds=True, inputs={"d_x": x})
    expected = F32(2) * np.roll(x, 1000) + F32(1)  # out[i] = 2 x[(i - 1000) mod N] + 1
    assert r.final["d_out"].tobytes() == expected.tobytes()


def test_store_past_a_device_array_is_reported_with_its_name():
    # g[i + 1] = x[i]: thread 255 of block 3 stores g[1024], 0 bytes past the end of g
    program, kernels, host = analysed("programs/device_array_oob.cu")
    dev = CpuDevice(check_bounds=True, jobs=1)
    module = dev.load_module(program)
    interp = HostInterpreter(host, {k.mangled: k for k in kernels}, dev, module)
    with pytest.raises(KernelFault) as e:
        interp.run()
    m = re.fullmatch(r"out-of-bounds store of 4 bytes at address 0x([0-9a-f]+) in kernel shift, "
                     r"block \(3, 0, 0\), thread \(255, 0, 0\)", e.value.message)
    assert m, e.value.message
    g = dict(zip((x.label for x in module.handle.host.globals),
                 module.handle.engines(1)[0].globals, strict=True))["g"]
    assert int(m.group(1), 16) == g + 4096
    assert e.value.notes == ("0 bytes past the end of g (4096 bytes)",)
    assert e.value.loc is not None and e.value.loc.line == 15  # g[i + 1] = x[i]


def test_traces_name_module_globals():
    program, kernels, host = analysed("programs/device_array.cu")
    r = run_host_program(host, program, kernels, CpuDevice(trace=True, jobs=1))
    scatter, gather = r.traces
    for t in (scatter, gather):
        assert t.globals == ("g",)
        rec = t.records[t.records["space"] == 2]
        assert len(rec) == 4096 and set(rec["buffer"].tolist()) == {0}
        assert set(rec["size"].tolist()) == {4}
    i = np.arange(4096)
    s = scatter.records[scatter.records["space"] == 2]
    tid = s["bx"].astype(np.int64) * 256 + s["tx"]
    assert np.array_equal(s["offset"], 4 * ((tid + 1000) % 4096))
    assert set(s["kind"].tolist()) == {1}
    gl = gather.records[gather.records["space"] == 2]
    assert sorted(gl["offset"].tolist()) == (4 * i).tolist()
    assert set(gl["kind"].tolist()) == {0}
    # the other accesses are the buffers' (space 0): x loaded by scatter, out stored by gather
    assert int((scatter.records["space"] == 0).sum()) == 4096
    assert int((gather.records["space"] == 0).sum()) == 4096


# ---- block orders of big grids -----------------------------------------------------------------
N_TICKETS = (1 << 22) + 3


@pytest.fixture(scope="module")
def tickets() -> dict[str, np.ndarray]:
    program, kernels, host = analysed("programs/block_tickets.cu")
    out = {}
    for order in ("forward", "reverse", "random:3", "random:4"):
        dev = CpuDevice(order=order, progress=False)
        out[order] = run_host_program(host, program, kernels, dev, order=order).final["d_pos"]
    out["random:3 again"] = run_host_program(
        host, program, kernels, CpuDevice(order="random:3", progress=False),
        order="random:3").final["d_pos"]
    return out


def test_big_grid_forward_and_reverse(tickets):
    n = N_TICKETS
    assert np.array_equal(tickets["forward"], np.arange(n, dtype=np.uint32))
    assert np.array_equal(tickets["reverse"], np.arange(n - 1, -1, -1, dtype=np.uint32))


def test_big_grid_random_order_is_a_reproducible_permutation(tickets):
    n = N_TICKETS
    a, b = tickets["random:3"], tickets["random:4"]
    for p in (a, b):  # every block ran exactly once
        assert np.array_equal(np.sort(p), np.arange(n, dtype=np.uint32))
    assert np.array_equal(a, tickets["random:3 again"])
    # not the identity, not reversed, and the two seeds give different orders; a random
    # permutation has about one fixed point
    assert int((a == np.arange(n)).sum()) < 20
    assert int((a == np.arange(n - 1, -1, -1)).sum()) < 20
    assert int((a == b).sum()) < 20


# ---- copies to and from device variables (cudaMemcpyToSymbol / FromSymbol) -------------------
@pytest.mark.parametrize("jobs", [1, 4])
def test_symbol_copies_reach_every_worker_and_runs_start_from_the_initializer(jobs):
    # scale: y[i] = x[i] * coef[i % 4], with coef = {1, 2, 3, 4} (the initializer), then h1,
    # then h1 with bytes [8, 16) from h2. 1024 blocks of 256 threads: 4 workers when asked,
    # each with its own copy of coef. The second run in the process starts from 1 2 3 4 again.
    for _ in range(2):
        r = run("programs/symbol_workers.cu", jobs=jobs)
        x = r.initial["d_x"]
        i = np.arange(x.size) % 4
        h1, h2 = r.host["h1"][:16].view(F32), r.host["h2"][:8].view(F32)
        last = np.concatenate([h1[:2], h2])
        assert r.final["d_y0"].tobytes() == (x * np.array([1, 2, 3, 4], F32)[i]).tobytes()
        assert r.final["d_y1"].tobytes() == (x * h1[i]).tobytes()
        assert r.final["d_y2"].tobytes() == (x * last[i]).tobytes()
        assert r.final["@coef"].tobytes() == last.tobytes()
        assert r.host["_ZZ4mainE3out"][:16].tobytes() == last.tobytes()


def test_a_worker_made_after_a_symbol_copy_starts_with_the_copied_bytes():
    from sirius.analysis.irview import build_view
    from sirius.runtime.cpu.jit import JitModule
    from sirius.runtime.device import Module

    program, kernels, host = analysed("programs/symbol_workers.cu")
    jm = JitModule(build_view(program.device_module))  # not the cached one: no workers yet
    dev, module = CpuDevice(), Module(jm)
    data = np.array([5, 6, 7, 8], F32)
    dev.copy_to_symbol(module, "coef", 0, data)  # made the first worker
    engines = jm.engines(3)
    i = jm.global_index("coef")
    assert [ctypes.string_at(e.globals[i], 16) for e in engines] == [data.tobytes()] * 3
    assert dev.copy_from_symbol(module, "coef", 4, 8).view(F32).tolist() == [6, 7]
    jm.reset()  # a new run: back to the initializer in every worker
    assert [ctypes.string_at(e.globals[i], 16) for e in engines] == \
        [np.array([1, 2, 3, 4], F32).tobytes()] * 3


def test_device_to_device_symbol_copies():
    # d_c -> coef (all 64), mul: acc[t] = a[t] * coef[t], then acc[32:64] -> d_a[0:32]
    r = run("programs/symbol_d2d.cu")
    c = r.final["d_c"].view(F32)
    a0 = r.initial["d_a"]
    with np.errstate(all="ignore"):
        acc = a0 * c
    assert r.final["@coef"].tobytes() == c.tobytes()
    assert r.final["@acc"].tobytes() == acc.tobytes()
    want = a0.copy()
    want[:32] = acc[32:]
    assert r.final["d_a"].tobytes() == want.tobytes()


def test_a_pointer_table_copied_to_a_device_variable_holds_this_runs_addresses():
    # bufs = {d_a, d_b}: twice writes d_b[i] = 2 d_a[i] through the table
    r = run("programs/symbol_pointers.cu", check_bounds=True)
    a = r.final["d_a"].view(F32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(r.final["d_b"].view(F32), F32(2) * a)


def test_symbol_copy_out_of_bounds_at_run_time_names_the_variable():
    # the offset is 8 t: the host model cannot refuse it, the run does at t = 2
    from sirius.diagnostics import SiriusError

    with pytest.raises(SiriusError) as e:
        run("programs/symbol_oob_loop.cu")
    assert e.value.message == ("a copy of 8 bytes at offset 16 to the __constant__ variable "
                               "'coef' is out of bounds: it has 16 bytes")
    assert e.value.loc is not None and e.value.loc.line == 13
    assert "bytes [16, 24) are outside [0, 16)" in e.value.notes[0]
