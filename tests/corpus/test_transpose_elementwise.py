"""Host model and kernel facts of kernels/transpose_elementwise.cu, derived by hand from the
source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "transpose_elementwise.cu"
F = 4  # sizeof(float)
TILE_DIM, BLOCK_ROWS = 32, 8
ROWS, COLS = 128, 64
TOTAL = ROWS * COLS
BYTES = TOTAL * F
A, B = 1.5, 0.25  # exactly representable in fp32


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _copies(doc):
    return [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
            for op in doc["host"]["ops"] if op["op"] == "copy"]


NAMES = ["d_in", "d_t", "d_out"]


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == [
        (n, BYTES) for n in NAMES]


def test_buffer_roles(doc):
    # Copied in only: input; written by kernels and copied out: output; neither: temp.
    role = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    expected = {
        "d_in": "input",
        "d_t": "temp",
        "d_out": "output",
    }
    assert {n: role[n] for n in expected} == expected


def test_launch_trace(doc):
    grid = ((COLS + TILE_DIM - 1) // TILE_DIM, (ROWS + TILE_DIM - 1) // TILE_DIM, 1)
    assert grid == (2, 4, 1)
    assert launch_trace(doc) == [
        ("transpose", grid, (TILE_DIM, BLOCK_ROWS, 1), 0,
         (("d_in", 0), ("d_t", 0), ROWS, COLS)),
        ("scale_shift", ((TOTAL + 255) // 256, 1, 1), (256, 1, 1), 0,
         (("d_t", 0), ("d_out", 0), A, B, TOTAL)),
    ]


def test_scalar_types(doc):
    launches = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    assert [[a["type"] for a in op["args"] if a["kind"] == "scalar"] for op in launches] == [
        ["i32", "i32"], ["float", "float", "i32"]]


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 3,
        ("copy", "H2D"),
        ("launch", "transpose"), ("launch", "scale_shift"),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 3,
    ]


def test_allocs_and_frees(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == [
        (n, BYTES) for n in NAMES]
    assert [op["buffer"] for op in ops if op["op"] == "free"] == NAMES


def test_copies(doc):
    got = [(k, d if k == "H2D" else s, n) for k, d, s, n in _copies(doc)]
    assert got == [("H2D", ("d_in", 0), BYTES), ("D2H", ("d_out", 0), BYTES)]


def test_copy_host_names(doc):
    assert [(k, d, s) for k, d, s, _ in _copies(doc)] == [
        ("H2D", ("d_in", 0), ("host", "h_in")),
        ("D2H", ("host", "h_out"), ("d_out", 0)),
    ]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"transpose", "scale_shift"}
    # tile[32][33]: one padding column against bank conflicts.
    assert kernels["transpose"]["static_smem_bytes"] == TILE_DIM * (TILE_DIM + 1) * F == 4224
    assert kernels["transpose"]["shared_arrays"] == [{"name": "tile", "bytes": 4224}]
    assert kernels["transpose"]["barriers"] == 1
    assert kernels["scale_shift"]["static_smem_bytes"] == 0
    assert kernels["scale_shift"]["barriers"] == 0
