"""Host model and kernel facts of kernels/helper_launch.cu, derived by hand from the source."""

import re

import pytest

from tests.helpers import KERNELS, address, ev, inspect_doc, launch_trace, structure

PROGRAM = "helper_launch.cu"
F = 4  # sizeof(float)
N, NROWS, WIN, BLOCK = 512, 3, 96, 128
BYTES = N * F
NAMES = ["d_x", "d_tmp", "d_y1", "d_y2", "d_rows", "d_win"]
SIZES = [BYTES, BYTES, BYTES, BYTES, NROWS * N * F, WIN * F]
GRID = ((N + BLOCK - 1) // BLOCK, 1, 1)


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _source_line(text: str) -> int:
    """The 1-based line of the only source line containing `text`."""
    lines = [i + 1 for i, ln in enumerate((KERNELS / PROGRAM).read_text().splitlines())
             if text in ln]
    assert len(lines) == 1, text
    return lines[0]


def _line(loc: str | None) -> int | None:
    m = re.search(r":(\d+)(?::\d+)?$", loc or "")
    return int(m.group(1)) if m else None


def forward(x: str, y: str, tmp: str) -> list[tuple]:
    """The launches of forward(x, y, tmp, N), mirroring the helper."""
    return [
        ("scale", GRID, (BLOCK, 1, 1), 0, ((x, 0), (tmp, 0), 2.0, N)),
        ("add_relu", GRID, (BLOCK, 1, 1), 0, ((tmp, 0), (x, 0), (y, 0), N)),
    ]


def accumulate(acc: str, rows: str, nrows: int) -> list[tuple]:
    return [("axpy", GRID, (BLOCK, 1, 1), 0, ((acc, 0), (rows, r * N * F), 0.5, N))
            for r in range(nrows)]


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == list(
        zip(NAMES, SIZES, strict=True))
    # role: output if a D2H copy reads the buffer, else input if an H2D copy writes it.
    # d_win is only memset and written by the D2D copy, then copied back.
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_x": "input", "d_tmp": "temp", "d_y1": "temp", "d_y2": "output",
                     "d_rows": "input", "d_win": "output"}


def test_structure(doc):
    # The helpers' launches appear in main's op list in call order; the helper's loop stays a
    # loop, its variable named as in the helper.
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 6,
        ("copy", "H2D"), ("copy", "H2D"),
        ("memset",),
        ("launch", "scale"), ("launch", "add_relu"),
        ("launch", "scale"), ("launch", "add_relu"),
        ("loop", "r", 0, NROWS, 1, [("launch", "axpy")]),
        ("copy", "D2D"),
        ("sync",),
        ("copy", "D2H"), ("copy", "D2H"),
        *[("free",)] * 6,
    ]


def test_launch_trace(doc):
    assert GRID == (4, 1, 1)
    assert launch_trace(doc) == [
        *forward("d_x", "d_y1", "d_tmp"),
        *forward("d_y1", "d_y2", "d_tmp"),
        *accumulate("d_y2", "d_rows", NROWS),
    ]


def test_loop_offset_moves_with_r(doc):
    loop = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    axpy = loop["body"][0]
    assert isinstance(axpy["args"][1]["offset"], str)  # depends on r
    for r in range(NROWS):
        assert address(axpy["args"][1], r=r) == ("d_rows", r * N * F)
        assert address(axpy["args"][0], r=r) == ("d_y2", 0)


def test_launch_locations_are_in_the_helpers(doc):
    launches = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    scale_line, relu_line = _source_line("scale<<<"), _source_line("add_relu<<<")
    assert [_line(op["loc"]) for op in launches] == [scale_line, relu_line] * 2
    loop = next(op for op in doc["host"]["ops"] if op["op"] == "loop")
    assert _line(loop["body"][0]["loc"]) == _source_line("axpy<<<")


def test_memset_and_copies(doc):
    ops = doc["host"]["ops"]
    assert [(_ref(op["dst"]), op["value"], ev(op["bytes"]))
            for op in ops if op["op"] == "memset"] == [(("d_win", 0), 0, WIN * F)]
    copies = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op in ops if op["op"] == "copy"]
    assert copies == [
        ("H2D", ("d_x", 0), ("host", "h_x"), BYTES),
        ("H2D", ("d_rows", 0), ("host", "h_rows"), NROWS * N * F),
        # cudaMemcpy(d_win + 16, d_y2 + 32, 64 * sizeof(float), cudaMemcpyDeviceToDevice)
        ("D2D", ("d_win", 16 * F), ("d_y2", 32 * F), 64 * F),
        ("D2H", ("host", "h_y"), ("d_y2", 0), BYTES),
        ("D2H", ("host", "h_win"), ("d_win", 0), WIN * F),
    ]


def test_allocs_frees_syncs(doc):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    assert [address(op) for op in ops if op["op"] == "free"] == [(n, 0) for n in NAMES]
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"scale", "add_relu", "axpy"}
    for k in kernels.values():
        assert k["static_smem_bytes"] == 0
        assert k["barriers"] == 0
    assert [p["name"] for p in kernels["scale"]["params"]] == ["x", "y", "a", "n"]
    assert [p["name"] for p in kernels["add_relu"]["params"]] == ["a", "b", "y", "n"]
    assert [p["name"] for p in kernels["axpy"]["params"]] == ["acc", "x", "alpha", "n"]
    assert [p["ir_type"] for p in kernels["axpy"]["params"]] == ["ptr", "ptr", "float", "i32"]
    assert kernels["add_relu"]["libdevice"] == ["__nv_fmaxf"]
