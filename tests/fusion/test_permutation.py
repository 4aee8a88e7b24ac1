"""Permutation re-indexing (issue 15 item 1; sirius/fusion/plan/permutation.py
`permutation_member`): a consumer whose read index permutes the digits of its linear thread id
runs in the threads of the producer that wrote what it reads. The program's header comment
says which variant fuses and why (tests/fusion/permutation_programs/mm_transpose.cu)."""

from __future__ import annotations

import functools

from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options
from sirius.fusion.spec import Member
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT

PROGRAM = ROOT / "tests" / "fusion" / "permutation_programs" / "mm_transpose.cu"
ORDERS = ("forward", "reverse", "random:5")


@functools.cache
def fused(*defines: str) -> FuseResult:
    return fuse([PROGRAM], Options(), flags=[f"-D{d}" for d in defines])


def verified(res: FuseResult) -> None:
    rep = verify_fused(res.original, res, seed=3, orders=ORDERS)
    assert rep.ok, rep.render()
    assert rep.rows, rep.render()  # dT compared value by value


def consumer_member(res: FuseResult) -> Member:
    (rec,) = res.fused
    spec = rec.kernel.spec if rec.kernel is not None else None
    assert spec is not None
    return spec.members[1]


def notes(res: FuseResult) -> str:
    return "\n".join(n for r in res.regions for n in r.notes)


def test_transpose_of_a_tiled_product_fuses_and_verifies():
    res = fused()
    # 2 launches: the product's threads each write a 2x2 tile; the transpose is GLOBAL
    assert (res.launches_before, res.launches_after) == (2, 1)
    (rec,) = res.fused
    assert rec.reasons == ["S3 consume: permutation re-indexed (4 instances per thread) map, "
                           "dependences GLOBAL"]
    m = consumer_member(res)
    assert len(m.mapping.reps) == 4 and m.blocks == 4
    verified(res)


def test_reindexed_instances_leave_their_original_block():
    """The inverse element of a consumer instance is written by another block than the one
    that ran it originally; the fused kernel runs it in the writer's block (checked by value in
    the test above, here that the move happens at all)."""
    from sirius.fusion.plan.alignment import member_expr_sets

    m = consumer_member(fused())
    moved = 0
    for block in range(4):
        for thread in range(64):
            for ids in member_expr_sets(m, (64, 1, 1), 4):
                bx = ids[0].evaluate({"block": block, "thread": thread})
                tx = ids[3].evaluate({"block": block, "thread": thread})
                # which producer block wrote the element the instance reads: row r = g % 32
                g = bx * 256 + tx
                row, col = g % 32, g // 32
                writer = (row // 16) * 2 + col // 16  # the product's blockIdx.y * 2 + .x
                assert writer == block
                moved += bx != block
    assert moved > 0


def test_not_a_bijection_is_not_reindexed():
    res = fused("HALF")  # T[g] = C[g / 2]: two instances read each element
    assert (res.launches_before, res.launches_after) == (2, 2)
    assert "read index is not injective" in notes(res)
    verified(res)


def test_elements_of_two_producer_blocks_are_refused():
    res = fused("PAIR_FAR")  # C[p] and C[p + 16 rows]: two producer threads, two blocks
    assert (res.launches_before, res.launches_after) == (2, 2)
    assert "reads elements written by two producer threads" in notes(res)
    verified(res)


def test_elements_of_one_producer_thread_fuse():
    res = fused("PAIR_NEAR")  # rows 2r and 2r + 1 of one 2x2 tile: one producer thread
    assert (res.launches_before, res.launches_after) == (2, 1)
    assert len(consumer_member(res).mapping.reps) == 2
    verified(res)


def test_multi_instance_map_round_trips_through_json():
    m = consumer_member(fused())
    assert Member.from_json(m.to_json()) == m
