"""Host model and kernel facts of kernels/elementwise_chain.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "elementwise_chain.cu"
F = 4  # sizeof(float)
N = 4096
BYTES = N * F
B1, B2, B3, B4 = 128, 256, 64, 96
S = 0.5  # exactly representable in fp32


def grid1d(b: int) -> tuple[int, int, int]:
    return ((N + b - 1) // b, 1, 1)


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
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == [
        ("d_x", BYTES), ("d_bias", BYTES), ("d_y", BYTES), ("d_z", BYTES), ("d_out", BYTES)]


def test_buffer_roles(doc):
    # Copied in only: input; written by kernels and copied out: output; neither: temp.
    role = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    expected = {
        "d_x": "input",
        "d_bias": "input",
        "d_y": "temp",
        "d_z": "temp",
        "d_out": "output",
    }
    assert {n: role[n] for n in expected} == expected


def test_launch_trace(doc):
    assert grid1d(B4) == (43, 1, 1)  # the partial last block of `square`
    assert launch_trace(doc) == [
        ("scale", grid1d(B1), (B1, 1, 1), 0, (("d_x", 0), ("d_y", 0), S, N)),
        ("add_bias", grid1d(B2), (B2, 1, 1), 0, (("d_y", 0), ("d_bias", 0), ("d_z", 0), N)),
        ("relu", grid1d(B3), (B3, 1, 1), 0, (("d_z", 0), N)),
        ("square", grid1d(B4), (B4, 1, 1), 0, (("d_z", 0), ("d_out", 0), N)),
    ]


def test_scalar_types(doc):
    launches = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    assert [a["type"] for a in launches[0]["args"] if a["kind"] == "scalar"] == ["float", "i32"]
    for op in launches[1:]:
        assert [a["type"] for a in op["args"] if a["kind"] == "scalar"] == ["i32"]


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 5,
        ("copy", "H2D"), ("copy", "H2D"),
        ("launch", "scale"), ("launch", "add_bias"), ("launch", "relu"), ("launch", "square"),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 5,
    ]


def test_allocs_and_frees(doc):
    ops = doc["host"]["ops"]
    names = ["d_x", "d_bias", "d_y", "d_z", "d_out"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == [
        (n, BYTES) for n in names]
    assert [op["buffer"] for op in ops if op["op"] == "free"] == names
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_copies(doc):
    got = [(k, d if k == "H2D" else None, s if k == "D2H" else None, n)
           for k, d, s, n in _copies(doc)]
    assert got == [
        ("H2D", ("d_x", 0), None, BYTES),
        ("H2D", ("d_bias", 0), None, BYTES),
        ("D2H", None, ("d_out", 0), BYTES),
    ]


def test_copy_host_names(doc):
    assert [(k, d, s) for k, d, s, _ in _copies(doc)] == [
        ("H2D", ("d_x", 0), ("host", "h_x")),
        ("H2D", ("d_bias", 0), ("host", "h_bias")),
        ("D2H", ("host", "h_out"), ("d_out", 0)),
    ]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"scale", "add_bias", "relu", "square"}
    for k in kernels.values():
        assert k["static_smem_bytes"] == 0
        assert k["barriers"] == 0
    assert [p["name"] for p in kernels["scale"]["params"]] == ["x", "y", "s", "n"]
    assert [p["ir_type"] for p in kernels["scale"]["params"]] == ["ptr", "ptr", "float", "i32"]
    assert kernels["relu"]["libdevice"] == ["__nv_fmaxf"]
