"""Host model and kernel facts of kernels/lstm_cell.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "lstm_cell.cu"
F = 4  # sizeof(float)
H, L, T = 64, 2, 4
BLOCK = 32

W_BYTES = L * 4 * H * H * F
B_BYTES = L * 4 * H * F
H_BYTES = (L + 1) * (T + 1) * H * F
C_BYTES = L * (T + 1) * H * F
SEQ_BYTES = T * H * F
NAMES = ["d_w", "d_u", "d_b", "d_h", "d_c"]
SIZES = [W_BYTES, W_BYTES, B_BYTES, H_BYTES, C_BYTES]


def cell_args(layer: int, t: int) -> tuple:
    """The kernel arguments of cell (l, t) as (buffer, byte offset) pairs, mirroring main()."""
    l = layer  # noqa: E741 (the source's loop variable)
    return (
        ("d_h", (l * (T + 1) + t + 1) * H * F),        # x
        ("d_h", ((l + 1) * (T + 1) + t) * H * F),      # h_prev
        ("d_c", (l * (T + 1) + t) * H * F),            # c_prev
        ("d_w", l * 4 * H * H * F),
        ("d_u", l * 4 * H * H * F),
        ("d_b", l * 4 * H * F),
        ("d_h", ((l + 1) * (T + 1) + t + 1) * H * F),  # h_next
        ("d_c", (l * (T + 1) + t + 1) * H * F),        # c_next
        H,
    )


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert SIZES == [131072, 131072, 2048, 3840, 2560]
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == list(
        zip(NAMES, SIZES, strict=True))
    # role: output if a D2H copy reads the buffer, else input if an H2D copy writes it.
    # d_c is only memset, never copied: temp.
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_w": "input", "d_u": "input", "d_b": "input", "d_h": "output", "d_c": "temp"}


def test_structure(doc):
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 5,
        ("memset",), ("memset",),
        *[("copy", "H2D")] * 4,
        ("loop", "l", 0, L, 1, [
            ("loop", "t", 0, T, 1, [("launch", "lstm_cell")]),
        ]),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 5,
    ]


def test_launch_trace(doc):
    expected = [("lstm_cell", (H // BLOCK, 1, 1), (BLOCK, 1, 1), 0, cell_args(layer, t))
                for layer in range(L) for t in range(T)]
    assert len(expected) == 8
    assert launch_trace(doc) == expected


def test_layer_input_is_previous_layer_output(doc):
    # The input of cell (1, t) is exactly the hidden state cell (0, t) wrote.
    outer = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    launch = outer["body"][0]["body"][0]
    for t in range(T):
        assert address(launch["args"][0], l=1, t=t) == address(launch["args"][6], l=0, t=t)
        # ... and the previous hidden state of (l, t+1) is what (l, t) wrote.
        for layer in range(L):
            assert address(launch["args"][1], l=layer, t=t + 1) == address(
                launch["args"][6], l=layer, t=t)


def test_args_are_affine_in_both_loop_variables(doc):
    outer = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    launch = outer["body"][0]["body"][0]
    args = launch["args"]
    assert [a["kind"] for a in args] == ["buffer"] * 8 + ["scalar"]
    assert args[8]["type"] == "i32" and args[8]["value"] == H
    for i, a in enumerate(args[:8]):
        assert "rotating" not in a
        # A plain affine offset: evaluate it directly at a few points of the domain.
        for layer in range(L):
            for t in range(T):
                assert (a["buffer"], ev(a["offset"], l=layer, t=t)) == cell_args(layer, t)[i]


def test_memsets_and_copies(doc):
    ops = doc["host"]["ops"]
    assert [(_ref(op["dst"]), op["value"], ev(op["bytes"]))
            for op in ops if op["op"] == "memset"] == [
        (("d_h", 0), 0, H_BYTES), (("d_c", 0), 0, C_BYTES)]
    copies = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op in ops if op["op"] == "copy"]
    assert copies == [
        ("H2D", ("d_w", 0), ("host", "h_w"), W_BYTES),
        ("H2D", ("d_u", 0), ("host", "h_u"), W_BYTES),
        ("H2D", ("d_b", 0), ("host", "h_b"), B_BYTES),
        ("H2D", ("d_h", H * F), ("host", "h_x"), SEQ_BYTES),
        ("D2H", ("host", "h_y"), ("d_h", (L * (T + 1) + 1) * H * F), SEQ_BYTES),
    ]
    assert (L * (T + 1) + 1) * H * F == 2816


def test_allocs_frees_syncs(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [address(op) for op in ops if op["op"] == "free"] == [(n, 0) for n in NAMES]
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"lstm_cell"}
    k = kernels["lstm_cell"]
    assert k["static_smem_bytes"] == 2 * H * F
    assert sorted((a["name"], a["bytes"]) for a in k["shared_arrays"]) == [
        ("s_h", H * F), ("s_x", H * F)]
    assert k["barriers"] == 1
    assert not k["dynamic_smem"]
    assert [p["name"] for p in k["params"]] == [
        "x", "h_prev", "c_prev", "w", "u", "b", "h_out", "c_out", "hidden"]
    assert [p["ir_type"] for p in k["params"]] == ["ptr"] * 8 + ["i32"]
    assert {"__nv_expf", "__nv_tanhf"} <= set(k["libdevice"])
