"""A megakernel's grid from occupancy (issue 15 item 4: "the grid limited to the blocks that can
be co-resident, from ptxas registers/shared memory and the per-arch SM count and occupancy
rules"): `backend.limits.blocks_per_sm` and the growth round of `fusion.rounds`."""

from __future__ import annotations

import pytest

from sirius.backend.limits import SMS, blocks_per_sm, coresident_grid
from sirius.backend.ptxas import KernelResources
from sirius.fusion.plan.planner import Options
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT


def _res(registers: int = 0, smem: int = 0) -> KernelResources:
    return KernelResources("k", True, registers=registers, smem=smem)


@pytest.mark.parametrize("arch,threads,registers,smem,dynamic,expect", [
    ("sm_80", 256, 32, 0, 0, 8),          # threads: 2048 / 256
    ("sm_80", 256, 64, 0, 0, 4),          # registers: 64 x 32 per warp, 16 K per scheduler
    ("sm_80", 128, 255, 0, 0, 2),         # 255 -> 8192 per warp: 2 warps per scheduler, 8
    ("sm_80", 256, 32, 48 * 1024, 0, 3),  # shared memory: 164 KiB / (48 + 1 reserved)
    ("sm_80", 256, 32, 16 * 1024, 16 * 1024, 4),  # static + dynamic: 164 / 33
    ("sm_75", 256, 32, 32 * 1024, 0, 2),  # Turing: 64 KiB, nothing reserved
    ("sm_80", 32, 16, 0, 0, 32),          # the block limit
    ("sm_80", 256, 32, 200 * 1024, 0, 0),  # one block does not fit
])
def test_blocks_per_sm_follow_the_occupancy_rules(arch, threads, registers, smem, dynamic,
                                                  expect):
    assert blocks_per_sm(_res(registers, smem), threads, arch, dynamic) == expect
    per, grid = coresident_grid(_res(registers, smem), threads, arch, dynamic)
    assert (per, grid) == (expect, expect * SMS[arch])


@pytest.mark.parametrize("variant", ["grid", pytest.param("counters", marks=pytest.mark.slow)])
def test_a_megakernel_grows_to_the_co_resident_blocks(variant):
    """kernels/tvm/resnext_block.cu: its members need more blocks than the A100's 108 SMs, and
    ptxas's registers and shared memory let 3 blocks sit on each SM, so the megakernel's grid
    is 324 blocks, not one per SM; the report says why, and every value matches in three
    orders."""
    res = fuse([ROOT / "kernels/tvm/resnext_block.cu"], Options(megakernel=variant))
    (mk,) = res.megakernels
    k = mk.kernel
    r = res.resources[k.name]
    per = blocks_per_sm(r, k.block[0] * k.block[1] * k.block[2], "sm_80", k.smem)
    assert per > 1 and k.grid[0] == per * SMS["sm_80"]
    assert any(f"{per} per SM on the 108 SMs" in x for x in mk.reasons)
    rep = verify_fused(res.original, res, orders=("forward", "reverse", "random:3"))
    assert rep.ok, rep.render()
