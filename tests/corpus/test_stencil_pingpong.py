"""Host model and kernel facts of kernels/stencil_pingpong.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure, unroll

PROGRAM = "stencil_pingpong.cu"
F = 4  # sizeof(float)
NX, NY, T = 64, 64, 5
BX, BY = 16, 16
BYTES = NX * NY * F
GRID = ((NX + BX - 1) // BX, (NY + BY - 1) // BY, 1)


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _pingpong() -> tuple[list[tuple[str, str]], str]:
    """(in, out) allocation of every step, and the allocation that holds the final result,
    following the source's swap `tmp = d_in; d_in = d_out; d_out = tmp` by hand."""
    d_in, d_out = "d_in", "d_out"  # pointer variables -> the allocation they point to
    steps = []
    for _ in range(T):
        steps.append((d_in, d_out))
        d_in, d_out = d_out, d_in
    return steps, d_in  # the D2H after the loop reads the variable d_in


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == [
        ("d_in", BYTES), ("d_out", BYTES)]
    # role: output if a D2H copy reads the buffer, else input if an H2D copy writes it.
    # d_out: the D2H after the loop reads it (T is odd); d_in: only written from the host.
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_in": "input", "d_out": "output"}


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        ("alloc",), ("alloc",),
        ("copy", "H2D"), ("copy", "H2D"),
        ("loop", "t", 0, T, 1, [("launch", "jacobi2d")]),
        ("sync",),
        ("copy", "D2H"),
        ("free",), ("free",),
    ]


def test_launch_trace(doc):
    steps, _ = _pingpong()
    assert GRID == (4, 4, 1)
    assert steps[0] == ("d_in", "d_out") and steps[1] == ("d_out", "d_in")
    assert launch_trace(doc) == [
        ("jacobi2d", GRID, (BX, BY, 1), 0, ((src, 0), (dst, 0), NX, NY)) for src, dst in steps]


def test_pingpong_args_rotate(doc):
    loop = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    launch = loop["body"][0]
    in_arg, out_arg = launch["args"][0], launch["args"][1]
    # Both pointers change with t: a single fixed buffer would be wrong.
    for arg in (in_arg, out_arg):
        assert arg["kind"] == "buffer"
        assert "rotating" in arg
        assert sorted(c["buffer"] for c in arg["rotating"]["choices"]) == ["d_in", "d_out"]
    steps, _ = _pingpong()
    for t, (src, dst) in enumerate(steps):
        assert address(in_arg, t=t) == (src, 0)
        assert address(out_arg, t=t) == (dst, 0)
    assert [a["type"] for a in launch["args"][2:]] == ["i32", "i32"]


def test_final_copy_reads_the_result(doc):
    steps, final = _pingpong()
    assert final == steps[-1][1] == "d_out"  # T is odd: the last step wrote d_out
    ops = doc["host"]["ops"]
    i_loop = next(i for i, op in enumerate(ops) if op["op"] == "loop")
    d2h = [op for op in ops[i_loop + 1:] if op["op"] == "copy" and op["kind"] == "D2H"]
    assert len(d2h) == 1
    assert _ref(d2h[0]["src"]) == (final, 0)
    assert _ref(d2h[0]["dst"]) == ("host", "h_u")
    assert ev(d2h[0]["bytes"]) == BYTES


def test_copies(doc):
    copies = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op, _ in unroll(doc["host"]["ops"]) if op["op"] == "copy"]
    assert copies == [
        ("H2D", ("d_in", 0), ("host", "h_u"), BYTES),
        ("H2D", ("d_out", 0), ("host", "h_u"), BYTES),
        ("D2H", ("host", "h_u"), ("d_out", 0), BYTES),
    ]


def test_allocs_frees_syncs(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == [
        ("d_in", BYTES), ("d_out", BYTES)]
    # cudaFree(d_in); cudaFree(d_out) after 5 swaps: each variable points to the allocation
    # made into the other one, so the allocation "d_out" is freed first.
    _, final = _pingpong()
    other = "d_in" if final == "d_out" else "d_out"
    assert [address(op) for op in ops if op["op"] == "free"] == [(final, 0), (other, 0)]
    assert final == "d_out"
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"jacobi2d"}
    k = kernels["jacobi2d"]
    assert k["static_smem_bytes"] == 0
    assert k["barriers"] == 0
    assert [p["name"] for p in k["params"]] == ["in", "out", "nx", "ny"]
    assert [p["ir_type"] for p in k["params"]] == ["ptr", "ptr", "i32", "i32"]
