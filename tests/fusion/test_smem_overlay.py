"""`--smem overlay` (issue 17 item 1, the tuner's shared-memory axis): the members of a vertical
kernel that use shared memory lay it over each other, with a block barrier before each one that
follows another. Checked by value (verify in three orders), by the kernel's shared memory and
by the barriers executed; without the barrier the layout is refused."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from sirius.fusion.codegen.emit import build
from sirius.fusion.plan.planner import Options
from sirius.fusion.spec import CodegenError
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused

PROGRAM = Path(__file__).parent / "smem_programs" / "two_tiles.cu"


@functools.cache
def fused(smem: str):
    return fuse([PROGRAM], Options(smem=smem))


def test_overlaid_shared_memory_keeps_every_value_with_one_more_barrier():
    concat, overlay = fused("concat"), fused("overlay")
    (kc,), (ko,) = [[r.kernel for r in x.fused] for x in (concat, overlay)]
    assert kc.arrangement == ko.arrangement == "vertical"
    # two tiles of 128 floats: side by side, or one over the other
    assert (kc.static_smem, ko.static_smem) == (1024, 512)
    assert [m.barrier_before for m in ko.spec.members] == [False, True]
    assert ko.spec.share_smem is True and kc.spec.share_smem is None
    rc = verify_fused(concat.original, concat, seed=3)
    ro = verify_fused(overlay.original, overlay, seed=3)
    assert rc.ok and ro.ok, (rc.render(), ro.render())
    assert all(r.bitwise for r in ro.rows)
    # 8 blocks: the members' own barrier each (16 in both), and the overlay's one per block
    assert ro.original_counters.barriers == 16
    assert (rc.fused_counters.barriers, ro.fused_counters.barriers) == (16, 24)


def test_overlay_without_the_barrier_is_refused():
    from dataclasses import replace

    ko = fused("overlay").fused[0].kernel
    spec = replace(ko.spec, members=tuple(replace(m, barrier_before=False)
                                          for m in ko.spec.members))
    with pytest.raises(CodegenError, match="no barrier separates them"):
        build(fused("overlay").original.program.device_ir, [spec])


def test_the_tuner_offers_the_overlay_only_where_it_changes_the_program():
    from sirius.tune.variants import Source, overlays_shared, plan_for

    chain = str(Path(__file__).parents[2] / "kernels" / "elementwise_chain.cu")
    assert overlays_shared(plan_for(Source((str(PROGRAM),), "sm_90"), True, "auto"))
    assert not overlays_shared(plan_for(Source((chain,), "sm_90"), True, "auto"))
