"""Host model and kernel facts of kernels/block_reduce.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "block_reduce.cu"
F = 4  # sizeof(float)
N = 20000
BLOCK = 256
NUM_BLOCKS = (N + BLOCK - 1) // BLOCK
FINAL_BLOCK = 128
WARP = 32


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _copies(doc):
    return [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
            for op in doc["host"]["ops"] if op["op"] == "copy"]


NAMES = ["d_in", "d_partial", "d_result"]
SIZES = [N * F, NUM_BLOCKS * F, F]


def test_entry_and_buffers(doc):
    assert NUM_BLOCKS == 79
    assert doc["host"]["entry"] == "main"
    buffers = [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]]
    assert buffers == list(zip(NAMES, SIZES, strict=True))
    assert SIZES == [80000, 316, 4]


def test_buffer_roles(doc):
    # Copied in only: input; written by kernels and copied out: output; neither: temp.
    role = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    expected = {
        "d_in": "input",
        "d_partial": "temp",
        "d_result": "output",
    }
    assert {n: role[n] for n in expected} == expected


def test_launch_trace(doc):
    assert launch_trace(doc) == [
        ("reduce_sum", (NUM_BLOCKS, 1, 1), (BLOCK, 1, 1), 0,
         (("d_in", 0), ("d_partial", 0), N)),
        ("reduce_sum", (1, 1, 1), (FINAL_BLOCK, 1, 1), 0,
         (("d_partial", 0), ("d_result", 0), NUM_BLOCKS)),
    ]


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 3,
        ("copy", "H2D"),
        ("launch", "reduce_sum"), ("launch", "reduce_sum"),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 3,
    ]


def test_allocs_and_frees(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [op["buffer"] for op in ops if op["op"] == "free"] == NAMES


def test_copies(doc):
    got = [(k, d if k == "H2D" else s, n) for k, d, s, n in _copies(doc)]
    assert got == [("H2D", ("d_in", 0), N * F), ("D2H", ("d_result", 0), F)]


def test_copy_host_names(doc):
    # The result is copied into the address of a local float, `&h_result`.
    assert [(k, d, s) for k, d, s, _ in _copies(doc)] == [
        ("H2D", ("d_in", 0), ("host", "h_in")),
        ("D2H", ("host", "h_result"), ("d_result", 0)),
    ]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"reduce_sum"}  # warp_reduce_sum is a __device__ helper, inlined
    k = kernels["reduce_sum"]
    assert k["static_smem_bytes"] == WARP * F == 128  # warp_sums[32]
    assert k["shared_arrays"] == [{"name": "warp_sums", "bytes": 128}]
    assert k["barriers"] == 1
    # Two inlined calls of warp_reduce_sum, each a 5-step loop (offsets 16..1) that -O2 unrolls:
    # facts are counted per IR call site.
    assert k["warp_ops"] == {"shfl.sync.down": 10}
