"""Code generation rounds (sirius/fusion/rounds.py): horizontal kernels whose members are all
launches of the original program are built with the vertical clusters, in one module build;
a horizontal kernel over vertical kernels ("mixed") needs a second. Values against the original
on the CPU executor."""

from __future__ import annotations

from pathlib import Path

from sirius.fusion import rounds
from sirius.pipeline import fuse, verify

PROGRAM = Path(__file__).parent / "rounds_programs" / "three_regions.cu"


def test_plain_horizontal_kernels_are_built_with_the_vertical_ones(monkeypatch):
    """three_regions.cu: a vertical pair; a horizontal kernel of two original launches; a
    vertical pair beside an independent launch (mixed). Build 1: both vertical kernels and the
    plain horizontal one; build 2: the mixed one, over the first build's module."""
    calls = []
    real = rounds.build

    def counted(ir, specs, **kw):
        calls.append(sorted(s.arrangement for s in specs))
        return real(ir, specs, **kw)

    monkeypatch.setattr(rounds, "build", counted)
    res = fuse([PROGRAM])
    assert sorted(r.arrangement for r in res.fused) == ["horizontal", "mixed", "vertical",
                                                        "vertical"]
    assert calls == [["horizontal", "vertical", "vertical"], ["horizontal"]]
    assert res.launches_before == 7 and res.launches_after == 3
    rep = verify(res, seed=3, orders=("forward", "reverse", "random:3"))
    assert rep.ok, rep.render()
