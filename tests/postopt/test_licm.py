"""licm (sirius/postopt/licm.py): normalisation by loop depth, address splitting and merged
conditions, hoisted by the pass itself. Values against the original on the CPU executor in
three orders and counts against the same pipeline without the pass (kernels/qkv_branches.cu,
where LLVM's own LICM leaves invariant address arithmetic in the loop); the IR rules: flags
that a regrouping could make false are dropped, nothing is hoisted past a definition that
does not dominate the preheader, small loops are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from sirius.pipeline import fuse, verify
from sirius.postopt import PassContext, parse_pipeline, run_pipeline

ROOT = Path(__file__).resolve().parents[2]
ORDERS = ("forward", "reverse", "random:3")
BASE = "host-constants,alias-facts,llvm-opt,loop-fuse,contract,llvm-opt{rounds=1}"

HEAD = """target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
"""


def _opt(body: str, pipeline: str = "licm") -> str:
    res = run_pipeline(HEAD + body, parse_pipeline(pipeline), PassContext())
    return res.text


def _fn(text: str, name: str) -> str:
    start = text.index(f"@{name}(")
    return text[start:text.index("\n}", start)]


@pytest.mark.xdist_group("licm")
def test_qkv_branches_fewer_instructions_same_values():
    src = ROOT / "kernels/qkv_branches.cu"
    without = fuse([src], passes=parse_pipeline(BASE))
    with_ = fuse([src], passes=parse_pipeline(BASE + ",licm"))
    notes = [n for st in with_.postopt if st.pass_text.startswith("licm") for n in st.notes]
    assert notes, "licm changed nothing in qkv_branches"
    rep = verify(with_, orders=ORDERS)
    assert rep.ok, rep.render()
    ref = verify(without, orders=ORDERS[:1])
    assert rep.fused_counters.instructions < ref.fused_counters.instructions
    # the loads and stores are the same: only address arithmetic moved
    assert rep.fused_counters.global_load_bytes == ref.fused_counters.global_load_bytes
    assert rep.fused_counters.global_store_bytes == ref.fused_counters.global_store_bytes


TREE = """
define ptx_kernel void @k(ptr noalias %out, i32 %a, i32 %b, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %s1 = add nuw nsw i32 %i, %a
  %s2 = add nuw nsw i32 %s1, %b
  %p = getelementptr inbounds i32, ptr %out, i32 %i
  store i32 %s2, ptr %p, align 4
  %i.next = add nuw nsw i32 %i, 1
  %c = icmp ult i32 %i.next, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}
"""


def test_regrouped_sum_keeps_nuw_drops_nsw():
    k = _fn(_opt(TREE), "k")
    pre, loop = k.split("loop:", 1)
    assert "add nuw i32 %a, %b" in pre  # hoisted, nuw kept (every partial sum <= the total)
    assert "nsw" not in pre
    assert "%s2 = add nuw i32 %licm." in loop and "%s1 =" not in loop


def test_mixed_flags_lose_nuw_too():
    k = _fn(_opt(TREE.replace("%s1 = add nuw nsw", "%s1 = add nsw")), "k")
    assert "add i32 %a, %b" in k.split("loop:", 1)[0]


def test_nested_loops_hoist_each_part_to_its_level():
    # (j + i*w) + (a + b): a + b to the outer preheader, + i*w to the inner preheader, + j in
    # the inner loop (the leaves sorted by the depth of the loop they vary in)
    body = """
define ptx_kernel void @k(ptr noalias %out, i32 %a, i32 %b, i32 %w, i32 %n) {
entry:
  br label %outer
outer:
  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]
  %iw = mul i32 %i, %w
  br label %inner
inner:
  %j = phi i32 [ 0, %outer ], [ %j.next, %inner ]
  %s1 = add i32 %j, %iw
  %s2 = add i32 %s1, %a
  %s3 = add i32 %s2, %b
  %p = getelementptr inbounds i32, ptr %out, i32 %j
  store i32 %s3, ptr %p, align 4
  %j.next = add nuw nsw i32 %j, 1
  %cj = icmp ult i32 %j.next, %n
  br i1 %cj, label %inner, label %latch
latch:
  %i.next = add nuw nsw i32 %i, 1
  %ci = icmp ult i32 %i.next, %n
  br i1 %ci, label %outer, label %exit
exit:
  ret void
}
"""
    k = _fn(_opt(body), "k")
    entry, rest = k.split("outer:", 1)
    outer, inner = rest.split("inner:", 1)
    inner = inner.split("latch:", 1)[0]
    assert "add i32 %a, %b" in entry
    assert "add i32 %licm." in outer and "%iw" in outer.split("%iw = mul", 1)[1]
    assert "%s1 =" not in inner and "%s2 =" not in inner
    assert inner.count(" add i32 ") == 1  # j + (everything invariant), where there were 3
    assert "%s3 = add i32 %licm." in inner


def test_no_preheader_no_rewrite():
    # the loop header has two predecessors outside the loop: no preheader, nothing hoisted
    body = TREE.replace("entry:\n  br label %loop", "entry:\n  %e = icmp eq i32 %n, 7\n"
                        "  br i1 %e, label %loop, label %side\nside:\n  br label %loop")
    body = body.replace("[ 0, %entry ]", "[ 0, %entry ], [ 1, %side ]")
    assert "licm." not in _opt(body)


def test_small_loop_left_alone_unless_asked():
    small = TREE.replace("icmp ult i32 %i.next, %n", "icmp ult i32 %i.next, 4")
    assert "licm." not in _opt(small)
    assert "licm." in _opt(small, "licm{small_trip=0}")


def test_threshold():
    assert "licm." not in _opt(TREE, "licm{threshold=2}")  # saves one add per iteration
