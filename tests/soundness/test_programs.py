"""Issue 12: programs A and B and their variants are never fused wrongly.

Every program of `programs/` hides a dependence between two launches behind something the
analysis once missed: a pointer loaded from memory (tables written by a kernel or by the host,
`__device__` pointer variables, pointers stored as integers, two-level tables, arithmetic on
loaded pointers), a `__device__` global touched in a `__noinline__` function, inline PTX that
stores, recursion. For each: `sirius analyze` has the dependence (source kernel, target kernel,
buffer), and `sirius fuse` followed by the differential check (forward, reverse and random block
orders, bounds checks on) is correct, or the two launches stay apart. Programs of `refused/`
write device addresses where the host model cannot place them: they are refused with the
line, never run with garbage pointers.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from sirius.analysis.host.model import Copy, DevRef
from sirius.analysis.program import analyze
from sirius.analysis.uar.build import UAR
from sirius.fusion.plan.planner import Options
from sirius.pipeline import fuse
from sirius.runtime.interpreter import run_program
from sirius.verify.differential import ORDERS, verify_fused
from tests.helpers import run_cli

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
REFUSED = HERE / "refused"

# program -> dependences that must be found: (source label, target label, kind, buffer);
# a label is a kernel name, or "copy H2D" / "copy D2H"
EXPECTED: dict[str, list[tuple[str, str, str, str]]] = {
    "kernel_table.cu": [("k1", "k2", "RAW", "a"), ("setp", "k2", "RAW", "tab")],
    "noinline_global.cu": [("k1", "k2", "RAW", "@g")],
    "device_ptr_var.cu": [("k1", "k2", "RAW", "a"), ("setp", "k2", "RAW", "@gp")],
    "device_ptr_init.cu": [("k1", "k2", "RAW", "@garr")],
    "host_table.cu": [("k1", "k2", "RAW", "a"), ("copy H2D", "k2", "RAW", "b"),
                      ("copy H2D", "k2", "RAW", "tab")],
    "host_loop_table.cu": [("copy H2D", "k", "RAW", "tab")],
    "ptr_arith.cu": [("k1", "k2", "RAW", "a")],
    "helper_write_direct_read.cu": [("k1", "k2", "RAW", "@gbuf")],
    "asm_store.cu": [("k1", "k2", "RAW", "@g")],
    "constant_global.cu": [("k1", "k3", "RAW", "@scale"), ("k2", "k3", "RAW", "b")],
    "noinline_ptr_param.cu": [("k1", "k2", "RAW", "@garr")],
    "two_level_table.cu": [("k1", "k2", "RAW", "a"), ("setp", "k2", "RAW", "tab"),
                           ("setp", "k2", "RAW", "tt")],
    "ptr_as_int.cu": [("k1", "k2", "RAW", "a"), ("setp", "k2", "RAW", "tab")],
    "unpassed_target.cu": [("k1", "k2", "RAW", "a"), ("k1", "copy D2H", "RAW", "a")],
    "noinline_loop.cu": [("k1", "k2", "RAW", "a")],
    "noinline_host_loop.cu": [("fill", "sum", "RAW", "a")],
    "recursive_global.cu": [("k1", "k2", "RAW", "@depth_seen")],
    "local_ptr_array.cu": [("k1", "k2", "RAW", "a"), ("k1", "k2", "RAW", "b")],
    "split_escaped.cu": [("k1", "k2", "RAW", "a"), ("k0", "r0", "RAW", "a")],
    "table_round_trip.cu": [("k1", "k2", "RAW", "a"), ("k1", "k3", "RAW", "a"),
                            ("copy H2D", "k2", "RAW", "tab2"), ("copy D2D", "k3", "RAW", "tab3")],
}
# launches that must stay apart (a GLOBAL dependence: the target reads what other blocks wrote)
APART = {"kernel_table.cu": ("k1", "k2"), "noinline_global.cu": ("k1", "k2"),
         "device_ptr_var.cu": ("k1", "k2"), "asm_store.cu": ("k1", "k2"),
         "two_level_table.cu": ("k1", "k2"), "ptr_as_int.cu": ("k1", "k2"),
         "unpassed_target.cu": ("k1", "k2"), "recursive_global.cu": ("k1", "k2"),
         "table_round_trip.cu": ("k1", "k2"), "local_ptr_array.cu": ("k1", "k2")}


def test_every_program_has_expectations():
    assert sorted(p.name for p in PROGRAMS.glob("*.cu")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 12


@functools.cache
def uar_of(name: str) -> UAR:
    return analyze([PROGRAMS / name])


def found(uar: UAR) -> set[tuple[str, str, str, str]]:
    label = {st.id: st.label for st in uar.statements}
    return {(label[d.src], label[d.dst], d.kind, d.buffer or "") for d in uar.dependences}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_analyze_finds_the_dependence(name):
    have = found(uar_of(name))
    missing = [d for d in EXPECTED[name] if d not in have]
    assert not missing, f"missing {missing}; found {sorted(have)}"


@functools.cache
def fused(name: str):
    return fuse([PROGRAMS / name], Options())


def groups(res) -> list[set[str]]:
    label = {st.id: st.label for st in res.uar.statements}
    return [{label[n.sid] for n in r.nodes} for r in res.fused]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fused_program_is_correct_or_unfused(name):
    res = fused(name)
    if name in APART:
        a, b = APART[name]
        assert not [g for g in groups(res) if a in g and b in g], groups(res)
    rep = verify_fused(res.original, res, orders=ORDERS, check_bounds=True)
    assert rep.ok and not rep.faults, (rep.verdict(), rep.faults,
                                       [r.mismatch_line() for r in rep.failed()])


def test_program_a_is_no_longer_fused():
    """Issue 12, program A: `sirius fuse` made 3 -> 2, k1 and k2 horizontal, NOT OK."""
    res = fused("kernel_table.cu")
    assert res.launches_after == 3
    dep = [d for d in uar_of("kernel_table.cu").dependences if d.buffer == "a"]
    assert [(d.width, d.exact) for d in dep] == [("GLOBAL", False)]


def test_program_b_global_is_exact():
    """Issue 12, program B: the global is written by one thread (i == n - 1) through setg and
    read by every thread of k2 through getg: found exactly, at its 4 bytes."""
    uar = uar_of("noinline_global.cu")
    k1 = next(st.id for st in uar.statements if st.label == "k1")
    eff = [e for e in uar.effects[k1] if e.buffer == "@g"]
    assert [(e.mode, e.exact, e.box) for e in eff] == [("write", True, (0, 3))]
    assert fused("noinline_global.cu").launches_after == 2


def test_call_site_binding_is_exact():
    """store_at(garr, i, v) writes garr[i]: the callee's p[i] moved to the call site is the
    thread's own element, so k1 -> k2 is a THREAD dependence (a bijection), not GLOBAL."""
    uar = uar_of("noinline_ptr_param.cu")
    dep = [d for d in uar.dependences if d.buffer == "@garr"]
    assert [(d.width, d.exact) for d in dep] == [("THREAD", True)]
    loop = [d for d in uar_of("noinline_loop.cu").dependences
            if d.buffer == "a" and d.kind == "RAW" and d.width != "GLOBAL"]
    assert loop and all(d.exact for d in loop)
    # put_row(a, t, i, v) in a kernel launched for t = 0..3: the row is the host loop variable
    rows = uar_of("noinline_host_loop.cu")
    fill = next(st.id for st in rows.statements if st.label == "fill")
    write = next(e for e in rows.effects[fill] if e.buffer == "a" and e.mode == "write")
    assert write.exact and write.box == (0, 4 * 4 * 1024 - 1)
    assert rows.exactness() == (7, 7)


def test_host_table_is_recorded_on_the_copy():
    uar = uar_of("host_table.cu")
    copies = [st.op for st in uar.statements if isinstance(st.op, Copy) and st.op.pointers]
    assert [c.pointers for c in copies] == [((0, DevRef("a")), (8, DevRef("b")))]
    assert uar.escaped >= {"a", "b"} and "x" not in uar.escaped
    loop = uar_of("host_loop_table.cu")
    copy = next(st.op for st in loop.statements if isinstance(st.op, Copy) and st.op.pointers)
    assert copy.pointers == tuple((8 * j, DevRef(f"bufs[{3 - j}]")) for j in range(4))


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8).view(np.float32)


def test_executor_writes_real_addresses_into_host_tables():
    """The table gets this run's device addresses (it used to get seeded random bytes and the
    kernel crashed): c = reversed(a) + b with a = x - 4, and c = bufs[3] + bufs[0]."""
    res = run_program([PROGRAMS / "host_table.cu"], seed=3, check_bounds=True)
    x, b, c = (_f32(res.final[n]) for n in ("x", "b", "c"))
    assert np.array_equal(c, (x - 4.0)[::-1] + b)
    res = run_program([PROGRAMS / "host_loop_table.cu"], seed=3, check_bounds=True)
    want = _f32(res.final["bufs[3]"]) + _f32(res.final["bufs[0]"])
    assert np.array_equal(_f32(res.final["c"]), want)


def test_kernel_written_table_values():
    res = run_program([PROGRAMS / "two_level_table.cu"], seed=5, check_bounds=True)
    x, c = _f32(res.final["x"]), _f32(res.final["c"])
    assert np.array_equal(c, ((x + 0.5) * 4.0)[::-1])


@pytest.mark.parametrize("name,line,what", [
    ("host_index_table.cu", 9, "a device address written to 'htab'"),
    ("host_random_table.cu", 10, "a pointer sirius does not know"),
])
def test_unplaceable_device_addresses_are_refused(name, line, what):
    for cmd in ("inspect", "analyze"):
        out = run_cli(cmd, str(REFUSED / name))
        assert out.returncode == 2, out.stderr
        assert f"{name}:{line}:" in out.stderr and what in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def touched(name: str, kernel: str, mode: str) -> set[str]:
    uar = uar_of(name)
    sid = next(st.id for st in uar.statements if st.label == kernel)
    return {e.buffer for e in uar.effects[sid] if e.mode == mode}


def test_loaded_pointers_reach_only_what_was_stored():
    """Precision where the table is known: a pointer read from `tab` reaches what was stored
    there (by a kernel or by the host), not every buffer."""
    assert touched("kernel_table.cu", "k2", "read") == {"tab", "a"}
    assert touched("host_table.cu", "k2", "read") == {"tab", "a", "b"}
    assert touched("two_level_table.cu", "k2", "read") == {"tt", "tab", "a"}
    assert touched("device_ptr_init.cu", "k2", "read") == {"@gp", "@garr"}
    assert touched("unpassed_target.cu", "k1", "write") == {"a"}


def test_what_cannot_be_followed_touches_everything():
    """Recursion, inline asm that stores, a pointer made from an integer: every allocation of
    the program and every module global, even those the launch does not receive."""
    everything = {"x", "a", "c", "@depth_seen"}
    assert touched("recursive_global.cu", "k1", "write") >= everything
    assert touched("asm_store.cu", "k1", "write") >= {"a", "b", "x", "c", "@g"}
    assert any("inline asm touching memory" in w for w in uar_of("asm_store.cu").warnings)
    assert touched("ptr_as_int.cu", "k2", "read") >= {"x", "a", "c", "tab"}


def test_analyze_cli_reports_program_a_dependence():
    """`sirius analyze --json` (what a user runs) has k1 -> k2 on `a`, inexact, and the loaded
    pointer's access with its base `*(param:0)`."""
    import json

    out = run_cli("analyze", "--json", str(PROGRAMS / "kernel_table.cu"))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    kernel = {st["id"]: st["kernel"] for st in doc["statements"]}
    deps = [(kernel[d["src"]], kernel[d["dst"]], d["kind"], d["buffer"], d["width"], d["exact"])
            for d in doc["dependences"] if d["buffer"] == "a"]
    assert deps == [("k1", "k2", "RAW", "a", "GLOBAL", False)]
    k2 = next(k for k in doc["kernels"] if k["kernel"] == "k2")
    assert [a["base"] for a in k2["accesses"] if not a["exact"]] == ["*(param:0)"]
