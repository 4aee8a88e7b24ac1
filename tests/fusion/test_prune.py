"""Dead and repeated launches are removed before fusion (`sirius.fusion.plan.prune`, issue 14
item 8). The cases of `prune_programs/dead_and_repeated.cu` are described in its header; every
pruned program is checked against the original (bitwise, forward and reverse)."""

from __future__ import annotations

import functools

import pytest

from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options
from sirius.fusion.report import plan_json, report_md
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

PROGRAM = ROOT / "tests" / "fusion" / "prune_programs" / "dead_and_repeated.cu"


@functools.cache
def fused(case: int, prune: bool = True) -> FuseResult:
    return fuse([PROGRAM], Options(prune=prune), flags=[f"-DCASE={case}"])


def removed(res: FuseResult) -> list[tuple[str, str, str | None]]:
    return [(p.kernel, p.kind, p.same_as) for p in res.pruned.pruned]


def verified(res: FuseResult) -> None:
    rep = verify_fused(res.original, res, seed=3, orders=("forward", "reverse"))
    assert rep.ok and all(r.bitwise for r in rep.rows), rep.render()


@pytest.mark.parametrize("case,want", [
    # debug's scratch is never read; the first scale is overwritten by the second before
    # anything reads out
    (0, [("debug", "dead", None), ("scale", "dead", None)]),
    # the next three in `make test-all` (each case is a compile, a fusion and two runs)
    pytest.param(1, [("debug", "dead", None), ("scale", "dead", None)], marks=pytest.mark.slow),
    pytest.param(2, [("debug", "dead", None)], marks=pytest.mark.slow),  # accum: x += 1
    pytest.param(3, [("scale", "dead", None)], marks=pytest.mark.slow),  # scratch copied back
    (4, [("debug", "dead", None), ("scale", "repeated", "S2")]),
    (5, [("scale", "dead", None)]),           # debug prints: kept
    # bump writes out in between: the second scale stays (and overwrites all of bump's work)
    (6, [("debug", "dead", None), ("bump", "dead", None)]),
])
def test_removed_launches(case: int, want: list) -> None:
    res = fused(case)
    assert removed(res) == want
    assert res.launches_before - len(want) == sum(1 for _ in res.analysed.launches())
    verified(res)


def test_report_and_plan_name_every_removal() -> None:
    res = fused(4)
    md = report_md(res)
    assert "## Launches removed (dead or repeated)" in md
    assert "S4 scale (" in md and "repeats S2 on the same inputs" in md
    doc = plan_json(res)["pruned"]
    assert [(d["kernel"], d["kind"], d["same_as"]) for d in doc] == [
        ("debug", "dead", None), ("scale", "repeated", "S2")]


def test_keep_launches() -> None:
    res = fused(0, prune=False)
    assert res.pruned is None and res.launches_before == 3
    out = run_cli("fuse", str(PROGRAM), "--keep-launches", "--json", "--no-verify", "-q")
    assert out.returncode == 0, out.stderr
    assert '"pruned": []' in out.stdout


def test_nothing_is_dead_when_nothing_is_copied_back(tmp_path) -> None:
    # every buffer is then the program's result; the second scale still repeats the first
    src = PROGRAM.read_text().replace("cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);",
                                      "")
    path = tmp_path / "no_copy_back.cu"
    path.write_text(src)
    res = fuse([path], Options(), flags=["-DCASE=0"])
    assert removed(res) == [("scale", "repeated", "S2")]
    verified(res)
