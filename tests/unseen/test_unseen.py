"""Programs in the style of public GPU benchmark suites (heat diffusion, a row-by-row dynamic
program, backpropagation, k-means, a histogram with atomics, tiled transpose, an MLP, a
warp-shuffle scan, syncs after every launch, Gaussian elimination sized from argv, an LU-like
decomposition with shrinking 2-D grids), written by an independent check of sirius on programs
it had not seen (BENCHMARKS.md, "Unseen programs"). Each is fused and verified in three orders
with the default options and both megakernel variants; they found the 2-D-grid, megakernel
wording and sync-in-loop defects fixed in this round. make test-all (about 3-5 minutes)."""

from __future__ import annotations

import pytest

from sirius.fusion.plan.planner import Options
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT

PROGRAMS = sorted((ROOT / "tests" / "unseen" / "programs").glob("*.cu"))
ARGS = {"gauss.cu": ["24"]}


@pytest.mark.slow
@pytest.mark.parametrize("variant", [None, "grid", "counters"])
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_unseen_program_fuses_and_verifies(path, variant):
    res = fuse([path], Options(megakernel=variant), argv=ARGS.get(path.name))
    assert res.launches_after <= res.launches_before
    rep = verify_fused(res.original, res, orders=("forward", "reverse", "random:3"))
    assert rep.ok, rep.render()


def test_the_programs_are_there():
    assert len(PROGRAMS) == 12
