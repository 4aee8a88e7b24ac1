"""Host model and kernel facts of kernels/matmul_bias_act.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "matmul_bias_act.cu"
F = 4  # sizeof(float)
TILE = 16
M = N = K = 64
BYTES_A, BYTES_B, BYTES_C, BYTES_BIAS = M * K * F, K * N * F, M * N * F, N * F


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _copies(doc):
    return [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
            for op in doc["host"]["ops"] if op["op"] == "copy"]


NAMES = ["d_A", "d_B", "d_bias", "d_C", "d_out"]
SIZES = [BYTES_A, BYTES_B, BYTES_BIAS, BYTES_C, BYTES_C]


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    buffers = [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]]
    assert buffers == list(zip(NAMES, SIZES, strict=True))
    assert SIZES == [16384, 16384, 256, 16384, 16384]


def test_buffer_roles(doc):
    # Copied in only: input; written by kernels and copied out: output; neither: temp.
    role = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    expected = {
        "d_A": "input",
        "d_B": "input",
        "d_bias": "input",
        "d_C": "temp",
        "d_out": "output",
    }
    assert {n: role[n] for n in expected} == expected


def test_launch_trace(doc):
    mm_grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE, 1)
    assert mm_grid == (4, 4, 1)
    assert launch_trace(doc) == [
        ("matmul", mm_grid, (TILE, TILE, 1), 0, (("d_A", 0), ("d_B", 0), ("d_C", 0), M, N, K)),
        ("bias_add", ((M * N + 255) // 256, 1, 1), (256, 1, 1), 0,
         (("d_C", 0), ("d_bias", 0), M, N)),
        ("act_tanh", ((M * N + 127) // 128, 1, 1), (128, 1, 1), 0,
         (("d_C", 0), ("d_out", 0), M * N)),
    ]


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 5,
        ("copy", "H2D"), ("copy", "H2D"), ("copy", "H2D"),
        ("launch", "matmul"), ("launch", "bias_add"), ("launch", "act_tanh"),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 5,
    ]


def test_allocs_and_frees(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [op["buffer"] for op in ops if op["op"] == "free"] == NAMES


def test_copies(doc):
    got = [(k, d if k == "H2D" else s, n) for k, d, s, n in _copies(doc)]
    assert got == [
        ("H2D", ("d_A", 0), BYTES_A),
        ("H2D", ("d_B", 0), BYTES_B),
        ("H2D", ("d_bias", 0), BYTES_BIAS),
        ("D2H", ("d_out", 0), BYTES_C),
    ]


def test_copy_host_names(doc):
    assert [(k, d, s) for k, d, s, _ in _copies(doc)] == [
        ("H2D", ("d_A", 0), ("host", "h_A")),
        ("H2D", ("d_B", 0), ("host", "h_B")),
        ("H2D", ("d_bias", 0), ("host", "h_bias")),
        ("D2H", ("host", "h_out"), ("d_out", 0)),
    ]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"matmul", "bias_add", "act_tanh"}
    # As and Bs: two 16x16 float tiles; one barrier after the loads, one after the products.
    assert kernels["matmul"]["static_smem_bytes"] == 2 * TILE * TILE * F == 2048
    assert kernels["matmul"]["shared_arrays"] == [{"name": "As", "bytes": 1024},
                                                 {"name": "Bs", "bytes": 1024}]
    assert kernels["matmul"]["barriers"] == 2
    assert [p["name"] for p in kernels["matmul"]["params"]] == ["A", "B", "C", "m", "n", "k"]
    assert kernels["act_tanh"]["libdevice"] == ["__nv_tanhf"]
    for name in ("bias_add", "act_tanh"):
        assert kernels[name]["static_smem_bytes"] == 0
        assert kernels[name]["barriers"] == 0
