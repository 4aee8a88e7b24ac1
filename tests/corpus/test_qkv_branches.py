"""Host model and kernel facts of kernels/qkv_branches.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "qkv_branches.cu"
F = 4  # sizeof(float)
SEQ, HIDDEN = 32, 64
BX = BY = 16
X_BYTES, W_BYTES, B_BYTES = SEQ * HIDDEN * F, HIDDEN * HIDDEN * F, HIDDEN * F

NAMES = ["d_X", "d_Wq", "d_Wk", "d_Wv", "d_bq", "d_bk", "d_bv", "d_Q", "d_K", "d_V"]
SIZES = [X_BYTES, W_BYTES, W_BYTES, W_BYTES, B_BYTES, B_BYTES, B_BYTES,
         X_BYTES, X_BYTES, X_BYTES]
INPUTS = ["X", "Wq", "Wk", "Wv", "bq", "bk", "bv"]
OUTPUTS = ["Q", "K", "V"]


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _copies(doc):
    return [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
            for op in doc["host"]["ops"] if op["op"] == "copy"]


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    buffers = [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]]
    assert buffers == list(zip(NAMES, SIZES, strict=True))
    assert SIZES[:5] == [8192, 16384, 16384, 16384, 256]


def test_buffer_roles(doc):
    # Copied in only: input; copied out: output.
    role = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert role == {**{f"d_{x}": "input" for x in INPUTS}, **{f"d_{x}": "output" for x in OUTPUTS}}


def test_launch_trace(doc):
    grid = ((HIDDEN + BX - 1) // BX, (SEQ + BY - 1) // BY, 1)
    assert grid == (4, 2, 1)
    assert launch_trace(doc) == [
        ("dense_bias", grid, (BX, BY, 1), 0,
         (("d_X", 0), (f"d_W{p}", 0), (f"d_b{p}", 0), (f"d_{p.upper()}", 0), SEQ, HIDDEN, HIDDEN))
        for p in ("q", "k", "v")
    ]


def test_same_kernel_for_all_branches(doc):
    launches = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    assert len({op["mangled"] for op in launches}) == 1


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 10,
        *[("copy", "H2D")] * 7,
        *[("launch", "dense_bias")] * 3,
        ("sync",),
        *[("copy", "D2H")] * 3,
        *[("free",)] * 10,
    ]


def test_allocs_and_frees(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [op["buffer"] for op in ops if op["op"] == "free"] == NAMES


def test_copies(doc):
    size = dict(zip(NAMES, SIZES, strict=True))
    got = [(k, d if k == "H2D" else s, n) for k, d, s, n in _copies(doc)]
    assert got == [("H2D", (f"d_{x}", 0), size[f"d_{x}"]) for x in INPUTS] + [
        ("D2H", (f"d_{x}", 0), X_BYTES) for x in OUTPUTS]


def test_copy_host_names(doc):
    assert [(k, d, s) for k, d, s, _ in _copies(doc)] == [
        ("H2D", (f"d_{x}", 0), ("host", f"h_{x}")) for x in INPUTS] + [
        ("D2H", ("host", f"h_{x}"), (f"d_{x}", 0)) for x in OUTPUTS]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"dense_bias"}
    assert kernels["dense_bias"]["static_smem_bytes"] == 0
    assert kernels["dense_bias"]["barriers"] == 0
    assert [p["name"] for p in kernels["dense_bias"]["params"]] == [
        "X", "W", "b", "Y", "seq", "in_dim", "out_dim"]
