"""Host model and kernel facts of kernels/two_mm.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "two_mm.cu"
F = 4  # sizeof(float)
NI, NJ, NK, NL = 32, 40, 48, 36
BX, BY = 32, 8
ALPHA, BETA = 1.5, 1.2  # 1.5 is exact in fp32, 1.2 is not

NAMES = ["d_A", "d_B", "d_tmp", "d_C", "d_D"]
SIZES = [NI * NK * F, NK * NJ * F, NI * NJ * F, NJ * NL * F, NI * NL * F]


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
    assert SIZES == [6144, 7680, 5120, 5760, 4608]


def test_buffer_roles(doc):
    # Copied in only: input; written by kernels and copied out: output; neither: temp.
    # (d_D is copied in AND out; its role is left to docs/host-model.md's rule.)
    role = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    expected = {
        "d_A": "input",
        "d_B": "input",
        "d_tmp": "temp",
        "d_C": "input",
    }
    assert {n: role[n] for n in expected} == expected


def test_launch_trace(doc):
    grid1 = ((NJ + BX - 1) // BX, (NI + BY - 1) // BY, 1)
    grid2 = ((NL + BX - 1) // BX, (NI + BY - 1) // BY, 1)
    assert grid1 == grid2 == (2, 4, 1)
    trace = launch_trace(doc)
    assert trace == [
        ("mm2_kernel1", grid1, (BX, BY, 1), 0,
         (NI, NJ, NK, NL, ALPHA, pytest.approx(BETA, rel=1e-6),
          ("d_tmp", 0), ("d_A", 0), ("d_B", 0))),
        ("mm2_kernel2", grid2, (BX, BY, 1), 0,
         (NI, NJ, NK, NL, ALPHA, pytest.approx(BETA, rel=1e-6),
          ("d_tmp", 0), ("d_C", 0), ("d_D", 0))),
    ]


def test_scalar_types(doc):
    launches = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    for op in launches:
        assert [a["kind"] for a in op["args"]] == ["scalar"] * 6 + ["buffer"] * 3
        assert [a["type"] for a in op["args"][:6]] == ["i32"] * 4 + ["float"] * 2


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 5,
        *[("copy", "H2D")] * 4,
        ("launch", "mm2_kernel1"),
        ("sync",),
        ("launch", "mm2_kernel2"),
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
    size = dict(zip(NAMES, SIZES, strict=True))
    got = [(k, d if k == "H2D" else s, n) for k, d, s, n in _copies(doc)]
    assert got == [("H2D", (b, 0), size[b]) for b in ("d_A", "d_B", "d_C", "d_D")] + [
        ("D2H", ("d_D", 0), size["d_D"])]


def test_copy_host_names(doc):
    assert [(k, d, s) for k, d, s, _ in _copies(doc)] == [
        ("H2D", (f"d_{x}", 0), ("host", f"h_{x}")) for x in ("A", "B", "C", "D")] + [
        ("D2H", ("host", "h_D"), ("d_D", 0))]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"mm2_kernel1", "mm2_kernel2"}
    for k in kernels.values():
        assert k["static_smem_bytes"] == 0
        assert k["barriers"] == 0
        assert [p["name"] for p in k["params"]][:6] == ["ni", "nj", "nk", "nl", "alpha", "beta"]
