"""Host model and kernel facts of kernels/converge_loop.cu, derived by hand from the source."""

import pytest

from tests.helpers import address, ev, inspect_doc, launch_trace, structure

PROGRAM = "converge_loop.cu"
F = 4  # sizeof(float), sizeof(int)
N, BLOCK = 1000, 128
BYTES = N * F
NAMES = ["d_x", "d_y", "d_b", "d_flag"]
SIZES = [BYTES, BYTES, BYTES, F]
GRID = ((N + BLOCK - 1) // BLOCK, 1, 1)


@pytest.fixture(scope="module")
def doc():
    return inspect_doc(PROGRAM)


@pytest.fixture(scope="module")
def loop(doc):
    loops = [op for op in doc["host"]["ops"] if op["op"] == "loop"]
    assert len(loops) == 1
    return loops[0]


def _ref(r: dict):
    return ("host", r["host"]) if "host" in r else address(r)


def _pingpong(k: int) -> tuple[str, str]:
    """The allocations behind (d_x, d_y) at the start of iteration k, by hand."""
    x, y = "d_x", "d_y"
    for _ in range(k):
        x, y = y, x
    return x, y


def test_entry_and_buffers(doc):
    assert doc["host"]["entry"] == "main"
    assert [(b["name"], b["bytes"]) for b in doc["host"]["buffers"]] == list(
        zip(NAMES, SIZES, strict=True))
    # role: output if a D2H copy reads the buffer, else input if an H2D copy writes it.
    # the final D2H may read d_x or d_y (it rotates), so both count as read back.
    roles = {b["name"]: b["role"] for b in doc["host"]["buffers"]}
    assert roles == {"d_x": "output", "d_y": "output", "d_b": "input", "d_flag": "output"}


def test_structure(doc, loop):
    var = loop["var"]
    assert var.startswith("_")
    assert structure(doc["host"]["ops"]) == [
        *[("alloc",)] * 4,
        ("copy", "H2D"), ("copy", "H2D"),
        ("loop", var, 0, None, 1, [("memset",), ("launch", "relax"), ("copy", "D2H")]),
        ("sync",),
        ("copy", "D2H"),
        *[("free",)] * 4,
    ]


def test_loop_is_opaque(doc, loop):
    # do { ... } while (h_flag && iters < 100): the flag is data, so the trip count is unknown
    # even though it is at most 100.
    assert loop["hi"] is None
    assert loop["lo"] == 0 and loop["step"] == 1
    assert loop["var"] not in ("iters", "h_flag")
    with pytest.raises(ValueError):
        launch_trace(doc)


def test_body_ops(loop):
    memset, launch, flag_copy = loop["body"]
    assert (_ref(memset["dst"]), memset["value"], ev(memset["bytes"])) == (("d_flag", 0), 0, F)
    assert launch["kernel"] == "relax"
    assert launch["grid"] == list(GRID) and launch["block"] == [BLOCK, 1, 1]
    assert launch["smem"] == 0
    assert (flag_copy["kind"], _ref(flag_copy["dst"]), _ref(flag_copy["src"]),
            ev(flag_copy["bytes"])) == ("D2H", ("host", "h_flag"), ("d_flag", 0), F)


def test_pingpong_args(loop):
    launch = loop["body"][1]
    var = loop["var"]
    args = launch["args"]
    assert [a["kind"] for a in args] == ["buffer"] * 4 + ["scalar"]
    assert args[4]["type"] == "i32" and args[4]["value"] == N
    for k in range(4):
        x, y = _pingpong(k)
        env = {var: k}
        assert [address(a, **env) for a in args[:4]] == [(x, 0), ("d_b", 0), (y, 0), ("d_flag", 0)]
    assert _pingpong(1) == ("d_y", "d_x")
    for a in (args[0], args[2]):
        assert "rotating" in a
        assert sorted(c["buffer"] for c in a["rotating"]["choices"]) == ["d_x", "d_y"]
    for a in (args[1], args[3]):
        assert "rotating" not in a


def test_copies_outside_the_loop(doc, loop):
    ops = doc["host"]["ops"]
    i_loop = next(i for i, op in enumerate(ops) if op["op"] == "loop")
    before = [(op["kind"], _ref(op["dst"]), _ref(op["src"]), ev(op["bytes"]))
              for op in ops[:i_loop] if op["op"] == "copy"]
    assert before == [
        ("H2D", ("d_x", 0), ("host", "h_x"), BYTES),
        ("H2D", ("d_b", 0), ("host", "h_b"), BYTES),
    ]
    after = [op for op in ops[i_loop + 1:] if op["op"] == "copy"]
    assert len(after) == 1
    final = after[0]
    assert final["kind"] == "D2H"
    assert _ref(final["dst"]) == ("host", "h_x")
    assert ev(final["bytes"]) == BYTES
    # Which allocation d_x points to after the loop depends on the parity of the unknown trip
    # count: the model rotates between the two with `<var>_last`, the last iteration's index.
    # The last iteration k wrote its y, and after its swap d_x points there.
    src = final["src"]
    assert "rotating" in src
    last = loop["var"] + "_last"
    for k in range(4):
        assert address(src, **{last: k}) == (_pingpong(k)[1], 0)


def test_allocs_frees_syncs(doc, loop):
    ops = doc["host"]["ops"]
    assert [(op["buffer"], op["bytes"]) for op in ops if op["op"] == "alloc"] == list(
        zip(NAMES, SIZES, strict=True))
    frees = [op for op in ops if op["op"] == "free"]
    assert len(frees) == 4
    assert [address(op) for op in frees[2:]] == [("d_b", 0), ("d_flag", 0)]
    # cudaFree(d_x); cudaFree(d_y): after the last iteration k the variables hold
    # _pingpong(k + 1), i.e. (y, x) of iteration k.
    last = loop["var"] + "_last"
    for k in range(4):
        x, y = _pingpong(k)
        assert [address(op, **{last: k}) for op in frees[:2]] == [(y, 0), (x, 0)]
    assert [op["what"] for op in ops if op["op"] == "sync"] == ["device"]


def test_kernels(doc):
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert set(kernels) == {"relax"}
    k = kernels["relax"]
    assert k["static_smem_bytes"] == 0
    assert k["barriers"] == 0
    assert [p["name"] for p in k["params"]] == ["x", "b", "y", "flag", "n"]
    assert [p["ir_type"] for p in k["params"]] == ["ptr"] * 4 + ["i32"]
