"""The TVM-generated models of the corpus (`kernels/tvm/*.cu`, or $SIRIUS_TVM_KERNELS).

What can be justified without deriving every kernel by hand:
- flow is never lost: a launch that reads bytes an earlier loop-free statement wrote has an
  incoming RAW on that buffer (the pruning only drops pairs that have a writer in between);
- a THREAD or BLOCK width is backed by a computed thread-level relation;
- bert_qkv: TVM's memory planner gives the three projections one scratch buffer, so the
  branches are ordered by WAR/WAW on it, but no value flows from one branch to another.
(Soundness against the executor's traces: tests/test_soundness.py.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.analysis.support import KERNELS, launch_deps, uar_of
from tests.helpers import by_size

TVM = Path(os.environ.get("SIRIUS_TVM_KERNELS", KERNELS / "tvm"))
MODELS = sorted(TVM.glob("*.cu")) if TVM.is_dir() else []


def _ids(p: Path) -> str:
    return p.stem


@pytest.mark.parametrize("path", by_size(MODELS), ids=_ids)  # large models: make test-all
def test_tvm_model(path):
    u = uar_of(str(path))
    # flow is never lost
    raw = {(d.dst, d.buffer) for d in u.dependences if d.kind == "RAW"}
    written: dict[str, list[tuple[int, int]]] = {}
    for st in u.statements:
        for e in u.effects[st.id]:
            if e.mode == "read" and e.box is not None and st.kind == "launch":
                if any(lo <= e.box[1] and e.box[0] <= hi for lo, hi in written.get(e.buffer, [])):
                    assert (st.id, e.buffer) in raw, (path.stem, st.id, e.buffer)
        for e in u.effects[st.id]:
            if e.mode == "write" and e.box is not None and not st.loops:
                written.setdefault(e.buffer, []).append(e.box)
    # a THREAD or BLOCK width is backed by the thread-level relation it was decided on
    for d in u.dependences:
        if d.width in ("THREAD", "BLOCK"):
            assert d.instances is not None and not d.instances.is_empty()


@pytest.mark.skipif(not (TVM / "bert_qkv.cu").exists(), reason="no TVM bert_qkv model")
def test_bert_qkv_branches_share_only_scratch():
    u = uar_of(str(TVM / "bert_qkv.cu"))
    kernels = [le.summary.name for le in u.launch_effects]
    assert len(kernels) == 6  # (matmul + reshape) x 3
    deps = launch_deps(u)
    # within a branch: the projection feeds its reshape
    for b in range(3):
        assert (f"L{2 * b}", f"L{2 * b + 1}", "RAW", "d_storage0", "GLOBAL") in deps
    # across branches: no RAW at all
    for src, dst, kind, *_ in deps:
        if int(src[1:]) // 2 != int(dst[1:]) // 2:
            assert kind in ("WAR", "WAW")
