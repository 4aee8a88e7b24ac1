"""Verify compares what the original observes (issue 16 item 6): a buffer storage splitting cut
into versions is read back through them (the bytes the original's buffer holds at the end);
with nothing copied back, every buffer the original holds is compared, and the report says
which buffers were compared and why."""

from __future__ import annotations

import dataclasses
import functools
import json

import numpy as np

from sirius.analysis.host.model import Buffer, HostProgram
from sirius.verify.observe import Compared, as_original, observe
from tests.helpers import ROOT, run_cli

QKV = str(ROOT / "tests" / "fusion" / "verify_programs" / "qkv_nocopy.cu")
N = 1024


@functools.cache
def qkv():
    from sirius.pipeline import fuse

    return fuse([QKV])


def test_qkv_without_copies_verifies_through_the_versions() -> None:
    # The case: no output copies, d_storage split; before, d_storage differed in all
    # 2048 elements under every order (version 0 holds the first proj's values).
    res = qkv()
    split = {s.buffer: s.names for s in res.storage.splits}
    assert split == {"d_storage": ("d_storage", "d_storage.v1", "d_storage.v2")}
    proc = run_cli("verify", QKV, "--json", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "ok"
    assert [c["buffer"] for c in doc["compared"]] == [
        "d_x", "d_storage", "d_out_q", "d_out_k", "d_out_v"]
    assert doc["output_rule"].startswith("every buffer the original holds")
    storage = doc["compared"][1]
    assert "storage splitting cut it into 3 versions" in storage["why"]
    assert storage["through"] == [{"buffer": "d_storage", "base": 0, "bytes": 8192},
                                  {"buffer": "d_storage.v1", "base": 0, "bytes": 8192},
                                  {"buffer": "d_storage.v2", "base": 4096, "bytes": 4096}]
    rows = [r for r in doc["rows"] if r["buffer"] == "d_storage"]
    assert len(rows) == 3 and all(r["mismatches"] == 0 and r["bitwise"] for r in rows)
    assert all(r["through"] == ["d_storage", "d_storage.v1", "d_storage.v2"] for r in rows)


def test_the_read_back_storage_holds_the_originals_values() -> None:
    # From the source: d_storage ends with 3x-1 in [0, N) (second proj) and -1.5x+0.25 in
    # [N, 2N) (third proj, at d_storage + N, reading x[0, N)); x is the seeded d_x the
    # original saw. clang contracts a*x+b to an FMA: compared within one float32 rounding.
    from sirius.verify.differential import _run

    res = qkv()
    orig = _run(res.original.host, res.original.program, res.original.kernels, "forward", 7,
                False)
    x = orig.final["d_x"]
    x64 = x[:N].astype(np.float64)
    want = np.concatenate([3 * x64 - 1, -1.5 * x64 + 0.25]).astype(np.float32)
    np.testing.assert_allclose(orig.final["d_storage"], want, rtol=1e-6, atol=1e-7)
    want = orig.final["d_storage"]
    from sirius.verify.differential import _fused_program

    got = _run(res.host, _fused_program(res.original, res), res.original.kernels, "reverse", 7,
               True, dtypes=orig.dtypes)
    [c] = [c for c in observe(res.original.host, res.host, res.storage).compared
           if c.buffer == "d_storage"]
    have, kept = as_original(c, got.final, got.initial, orig.final["d_storage"])
    np.testing.assert_array_equal(have, want)
    assert kept == 0
    # version 0 alone is the first proj's 2x+1: what verify compared before
    assert not np.array_equal(got.final["d_storage"], want)


def test_without_the_split_record_the_storage_differs() -> None:
    # the same fused program, verified as if nothing had been split: d_storage is compared as
    # itself and differs (the check is not vacuous)
    from sirius.verify.differential import verify_fused

    res = qkv()
    rep = verify_fused(res.original, dataclasses.replace(res, storage=None),
                       orders=("forward",), original_orders=("forward",))
    assert [r.buffer for r in rep.failed()] == ["d_storage"]
    assert rep.failed()[0].mismatches == 2 * N


def _versions(*parts):
    return Compared("b", "test", tuple(parts))


def test_as_original_takes_the_last_written_element() -> None:
    # b: 8 int32; version 1 covers all of it and writes elements 0, 2, 4, 6 (a strided
    # writer: its hull has gaps); version 2 covers bytes [16, 32) and writes element 5.
    b0 = np.arange(100, 108, dtype=np.int32)
    v1_init = np.full(8, -1, np.int32)
    v1 = v1_init.copy()
    v1[::2] = [10, 12, 14, 16]
    v2_init = np.full(4, -2, np.int32)
    v2 = v2_init.copy()
    v2[1] = 55
    final = {"b": b0, "b.v1": v1, "b.v2": v2}
    initial = {"b.v1": v1_init, "b.v2": v2_init}
    want = np.array([10, 101, 12, 103, 14, 55, 16, 107], np.int32)
    c = _versions(("b", 0, 32), ("b.v1", 0, 32), ("b.v2", 16, 16))
    have, kept = as_original(c, final, initial, want)
    np.testing.assert_array_equal(have, want)
    assert kept == 0
    # a wrong value in the last version is seen
    v2[1] = 56
    have, _ = as_original(c, final, initial, want)
    assert have[5] == 56


def test_as_original_accepts_a_rewrite_with_the_initial_value() -> None:
    # version 1 rewrote element 3 with exactly its initial value: unchanged in the run, so it
    # is ambiguous; the original's value (that same value) is accepted and counted
    b0 = np.zeros(4, np.int32)
    v1_init = np.array([7, 7, 7, 7], np.int32)
    v1 = np.array([1, 2, 3, 7], np.int32)
    want = np.array([1, 2, 3, 7], np.int32)
    c = _versions(("b", 0, 16), ("b.v1", 0, 16))
    have, kept = as_original(c, {"b": b0, "b.v1": v1}, {"b.v1": v1_init}, want)
    np.testing.assert_array_equal(have, want)
    assert kept == 1
    # ... and so is the other reading (not written: version 0's value)
    want2 = np.array([1, 2, 3, 0], np.int32)
    have, kept = as_original(c, {"b": b0, "b.v1": v1}, {"b.v1": v1_init}, want2)
    np.testing.assert_array_equal(have, want2)
    assert kept == 0
    # a third value is neither: the version-0 reading stays and differs
    have, _ = as_original(c, {"b": b0, "b.v1": v1}, {"b.v1": v1_init},
                          np.array([1, 2, 3, 9], np.int32))
    assert have[3] == 0


def test_observe_names_what_it_skips() -> None:
    bufs = (Buffer(0, "a", 16, "input"), Buffer(1, "t", 16, "temp"))
    original = HostProgram("main", bufs, ())
    fused = HostProgram("main", bufs[:1], ())
    seen = observe(original, fused)
    assert seen.names == ["a"]
    assert seen.skipped == (("t", "not in the fused program (a temporary fusion removed; "
                                  "nothing copies it back)"),)
    # with outputs, only they are compared, each with its reason
    out = HostProgram("main", (*bufs, Buffer(2, "o", 16, "output")), ())
    seen = observe(out, fused)
    assert [(c.buffer, c.why) for c in seen.compared] == [("o", "role output")]
