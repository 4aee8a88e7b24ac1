"""Host model and kernel facts of kernels/early_return.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "early_return.cu"
F = 4  # sizeof(float)
N, N_MAX = 1000, 2048
BLOCK1, BLOCK2 = 256, 128
BYTES = N * F
NAMES = ["d_x", "d_y", "d_z"]


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == [
        (n, BYTES) for n in NAMES]
    # role: output if a D2H copy reads the buffer, else input if an H2D copy writes it.
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_x": "input", "d_y": "temp", "d_z": "output"}


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 3,
        ("copy", "H2D"),
        ("launch", "scale_shift"),
        ("launch", "square_diff"),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 3,
    ]


def test_launch_trace(doc):
    grid1 = ((N + BLOCK1 - 1) // BLOCK1, 1, 1)
    grid2 = (N_MAX // BLOCK2, 1, 1)
    # Both grids over-cover n; the second one by more than a whole block.
    assert grid1 == (4, 1, 1) and grid1[0] * BLOCK1 > N and N % BLOCK1 != 0
    assert grid2 == (16, 1, 1) and grid2[0] * BLOCK2 - N > BLOCK2
    assert launch_trace(doc) == [
        ("scale_shift", grid1, (BLOCK1, 1, 1), 0, (("d_x", 0), ("d_y", 0), 2.0, 0.5, N)),
        ("square_diff", grid2, (BLOCK2, 1, 1), 0, (("d_y", 0), ("d_x", 0), ("d_z", 0), N)),
    ]


def test_scalar_types(doc):
    launches = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    assert [(a["kind"], a.get("type")) for a in launches[0]["args"]] == [
        ("buffer", None), ("buffer", None), ("scalar", "float"), ("scalar", "float"),
        ("scalar", "i32")]
    assert [(a["kind"], a.get("type")) for a in launches[1]["args"]] == [
        ("buffer", None), ("buffer", None), ("buffer", None), ("scalar", "i32")]


def test_copies(doc):
    copies = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op in doc["host"]["ops"] if op["op"] == "copy"]
    assert copies == [
        ("H2D", ("d_x", 0), ("host", "h_x"), BYTES),
        ("D2H", ("host", "h_z"), ("d_z", 0), BYTES),
    ]


def test_allocs_frees_syncs(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == [
        (n, BYTES) for n in NAMES]
    assert [address(op) for op in ops if op["op"] == "free"] == [(n, 0) for n in NAMES]
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"scale_shift", "square_diff"}
    for k in kernels.values():
        assert k["static_smem_bytes"] == 0
        assert k["barriers"] == 0
        assert k["atomics"] == {}
    assert [p["name"] for p in kernels["scale_shift"]["params"]] == ["x", "y", "a", "b", "n"]
    assert [p["ir_type"] for p in kernels["scale_shift"]["params"]] == [
        "ptr", "ptr", "float", "float", "i32"]
    assert [p["name"] for p in kernels["square_diff"]["params"]] == ["y", "x", "z", "n"]
