"""Host model and kernel facts of kernels/histogram_atomics.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "histogram_atomics.cu"
U = 4  # sizeof(unsigned int)
N, NBINS, BLOCK, GRID = 8192, 64, 256, 8
NAMES = ["d_data", "d_hist"]
SIZES = [N * U, NBINS * U]


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
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_data": "input", "d_hist": "output"}


def test_structure(doc):
    # cudaGetLastError() is no GPU operation: it leaves no op.
    assert structure(doc["host"]["ops"]) == [
        ("alloc",), ("alloc",),
        ("copy", "H2D"),
        ("memset",),
        ("launch", "histogram"),
        ("sync",),
        ("copy", "D2H"),
        ("free",), ("free",),
    ]


def test_launch_trace(doc):
    assert GRID * BLOCK < N  # the grid-stride loop runs N / (GRID * BLOCK) = 4 times
    assert launch_trace(doc) == [
        ("histogram", (GRID, 1, 1), (BLOCK, 1, 1), 0, (("d_data", 0), ("d_hist", 0), N)),
    ]
    launch = next(op for op in doc["host"]["ops"] if op["op"] == "launch")
    assert [a["kind"] for a in launch["args"]] == ["buffer", "buffer", "scalar"]
    assert launch["args"][2]["type"] == "i32"


def test_memset_zeroes_histogram_before_launch(doc):
    ops = doc["host"]["ops"]
    kinds = [op["op"] for op in ops]
    i_memset, i_launch = kinds.index("memset"), kinds.index("launch")
    assert i_memset < i_launch
    m = ops[i_memset]
    assert (_ref(m["dst"]), m["value"], ev(m["bytes"])) == (("d_hist", 0), 0, NBINS * U)


def test_copies(doc):
    copies = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op in doc["host"]["ops"] if op["op"] == "copy"]
    assert copies == [
        ("H2D", ("d_data", 0), ("host", "h_data"), N * U),
        ("D2H", ("host", "h_hist"), ("d_hist", 0), NBINS * U),
    ]


def test_allocs_frees_syncs(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [address(op) for op in ops if op["op"] == "free"] == [(n, 0) for n in NAMES]
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"histogram"}
    k = kernels["histogram"]
    assert k["static_smem_bytes"] == NBINS * U
    assert [(a["name"], a["bytes"]) for a in k["shared_arrays"]] == [("s_hist", NBINS * U)]
    assert k["barriers"] == 2
    assert [p["name"] for p in k["params"]] == ["data", "hist", "n"]
    assert [p["ir_type"] for p in k["params"]] == ["ptr", "ptr", "i32"]
    # Two atomicAdd call sites: one on the shared bins, one on the global histogram.
    atomics = k["atomics"]
    assert sum(atomics.values()) == 2
    assert sum(n for kind, n in atomics.items() if kind.endswith("shared")) == 1
    assert all("add" in kind for kind in atomics)
