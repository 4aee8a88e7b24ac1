"""Host model and kernel facts of kernels/gaussian.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "gaussian.cu"
F = 4  # sizeof(float)
N = 64
B1, B2 = 32, 16  # FAN1_BLOCK, FAN2_BLOCK
MAT, VEC = N * N * F, N * F
NAMES = ["d_m", "d_a", "d_b"]
SIZES = [MAT, MAT, VEC]


def grids(t: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    rows, cols = N - 1 - t, N - t
    return ((rows + B1 - 1) // B1, 1, 1), ((rows + B2 - 1) // B2, (cols + B2 - 1) // B2, 1)


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == list(
        zip(NAMES, SIZES, strict=True))
    # role: output if a D2H copy reads the buffer, else input if an H2D copy writes it.
    # all three are copied back (d_m was only memset before).
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_m": "output", "d_a": "output", "d_b": "output"}


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 3,
        ("memset",),
        ("copy", "H2D"), ("copy", "H2D"),
        ("loop", "t", 0, N - 1, 1, [
            ("launch", "Fan1"), ("sync",), ("launch", "Fan2"), ("sync",),
        ]),
        *[("copy", "D2H")] * 3,
        *[("free",)] * 3,
    ]


def test_launch_trace(doc):
    expected = []
    for t in range(N - 1):
        g1, g2 = grids(t)
        expected.append(("Fan1", g1, (B1, 1, 1), 0, (("d_m", 0), ("d_a", 0), N, t)))
        expected.append(("Fan2", g2, (B2, B2, 1), 0,
                         (("d_m", 0), ("d_a", 0), ("d_b", 0), N, N - t, t)))
    assert len(expected) == 2 * 63
    assert launch_trace(doc) == expected


def test_grids_shrink(doc):
    # The hand-derived shapes: Fan1 has 2 blocks while more than 32 rows are left, then 1;
    # Fan2 starts at 4x4 blocks and ends at 1x1.
    assert grids(0) == ((2, 1, 1), (4, 4, 1))
    assert grids(30) == ((2, 1, 1), (3, 3, 1))
    assert grids(31) == ((1, 1, 1), (2, 3, 1))
    assert grids(N - 2) == ((1, 1, 1), (1, 1, 1))
    loop = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    fan1, fan2 = (op for op in loop["body"] if op["op"] == "launch")
    # The grids depend on t: they must stay expressions in t, not be folded to one value.
    assert isinstance(fan1["grid"][0], str)
    assert isinstance(fan2["grid"][0], str) and isinstance(fan2["grid"][1], str)
    assert fan1["grid"][1:] == [1, 1] and fan2["grid"][2] == 1
    assert fan1["block"] == [B1, 1, 1] and fan2["block"] == [B2, B2, 1]
    for t in range(N - 1):
        g1, g2 = grids(t)
        assert tuple(ev(g, t=t) for g in fan1["grid"]) == g1
        assert tuple(ev(g, t=t) for g in fan2["grid"]) == g2


def test_scalar_args(doc):
    loop = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    fan1, fan2 = (op for op in loop["body"] if op["op"] == "launch")
    assert [a["kind"] for a in fan1["args"]] == ["buffer", "buffer", "scalar", "scalar"]
    assert [a["kind"] for a in fan2["args"]] == ["buffer"] * 3 + ["scalar"] * 3
    assert [a["type"] for a in fan1["args"][2:]] == ["i32", "i32"]
    assert [a["type"] for a in fan2["args"][3:]] == ["i32", "i32", "i32"]
    for t in (0, 1, 17, N - 2):
        assert ev(fan1["args"][3]["value"], t=t) == t
        assert ev(fan2["args"][4]["value"], t=t) == N - t  # j1
        assert ev(fan2["args"][5]["value"], t=t) == t


def test_memset_and_copies(doc):
    ops = doc["host"]["ops"]
    assert [(_ref(op["dst"]), op["value"], ev(op["bytes"]))
            for op in ops if op["op"] == "memset"] == [(("d_m", 0), 0, MAT)]
    copies = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op in ops if op["op"] == "copy"]
    assert copies == [
        ("H2D", ("d_a", 0), ("host", "h_a"), MAT),
        ("H2D", ("d_b", 0), ("host", "h_b"), VEC),
        ("D2H", ("host", "h_m"), ("d_m", 0), MAT),
        ("D2H", ("host", "h_a"), ("d_a", 0), MAT),
        ("D2H", ("host", "h_b"), ("d_b", 0), VEC),
    ]


def test_allocs_frees_syncs(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [address(op) for op in ops if op["op"] == "free"] == [(n, 0) for n in NAMES]
    loop = next(op for op in ops if op["op"] == "loop")
    assert [op["what"] for op in loop["body"] if op["op"] == "sync"] == ["device", "device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"Fan1", "Fan2"}
    for k in kernels.values():
        assert k["static_smem_bytes"] == 0
        assert k["barriers"] == 0
    assert [p["name"] for p in kernels["Fan1"]["params"]] == ["m_cuda", "a_cuda", "size", "t"]
    assert [p["name"] for p in kernels["Fan2"]["params"]] == [
        "m_cuda", "a_cuda", "b_cuda", "size", "j1", "t"]
    assert [p["ir_type"] for p in kernels["Fan2"]["params"]] == ["ptr"] * 3 + ["i32"] * 3
