"""Code motion for fewer block barriers (issue 14 item 5, SIRIUS 5.1): in a vertical kernel,
members that no dependence orders move so that they share barriers. Checked by value (verify
in three orders) and by the barriers executed, against the same plan without the motion; a
chain whose barriers are all needed keeps them."""

from __future__ import annotations

from pathlib import Path

from sirius.fusion.plan.planner import Options, Planner
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused

PROGRAMS = Path(__file__).parent / "barrier_programs"
BLOCKS = 8


def _fuse(name: str, monkeypatch=None, flags: tuple[str, ...] = ()):
    if monkeypatch is not None:  # the plan as it was before the motion
        monkeypatch.setattr(Planner, "_share_barriers", lambda self, c, g: None)
    return fuse([PROGRAMS / name], Options(arrangement="vertical"), flags=flags)


def _kernel(res):
    (rec,) = res.fused
    assert rec.arrangement == "vertical"
    return rec


def test_independent_chains_share_one_barrier(monkeypatch):
    moved = _fuse("two_chains.cu")
    rec = _kernel(moved)
    # A, C | B, D: one barrier instead of A | B, C | D
    assert [n.launch.kernel for n in rec.nodes] == ["scale_a", "scale_c", "shift_b", "shift_d"]
    assert [m.barrier_before for m in rec.kernel.spec.members] == [False, False, True, False]
    assert any("code motion: 2 -> 1 block barriers" in r for r in rec.reasons), rec.reasons
    rep = verify_fused(moved.original, moved, seed=5)
    assert rep.ok, rep.render()
    assert rep.original_counters.barriers == 0
    assert rep.fused_counters.barriers == BLOCKS

    plain = _fuse("two_chains.cu", monkeypatch)
    prec = _kernel(plain)
    assert [n.launch.kernel for n in prec.nodes] == ["scale_a", "shift_b", "scale_c", "shift_d"]
    old = verify_fused(plain.original, plain, seed=5)
    assert old.ok and old.fused_counters.barriers == 2 * BLOCKS
    # the original's values bit for bit either way, and the same work apart from the barrier
    assert len(rep.rows) == 6 and all(r.bitwise and r.mismatches == 0 for r in rep.rows)
    assert rep.fused_counters.global_load_bytes == old.fused_counters.global_load_bytes


def test_a_chain_of_block_dependences_keeps_its_barriers():
    res = _fuse("two_chains.cu", flags=("-DONE_CHAIN",))
    rec = _kernel(res)
    assert [n.launch.kernel for n in rec.nodes] == ["scale_a", "shift_b", "scale_c", "shift_d"]
    assert [m.barrier_before for m in rec.kernel.spec.members] == [False, True, False, True]
    assert not any("code motion" in r for r in rec.reasons)
    rep = verify_fused(res.original, res, seed=5)
    assert rep.ok and rep.fused_counters.barriers == 2 * BLOCKS
