"""What fusion produces: the program it started from (`Original`), a record per fused launch
(`FusedLaunchRecord`) and the whole result (`FuseResult`), everything `sirius fuse` writes and
`sirius verify` runs. driver.py makes the result; rounds.py fills in the generated part."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from sirius.analysis.host.model import HostProgram, launch_count
from sirius.analysis.kernel.facts import KernelInfo
from sirius.analysis.uar.build import UAR
from sirius.backend.ptxas import KernelResources
from sirius.fusion.plan.planner import Options, Region
from sirius.fusion.spec import FusedKernel
from sirius.postopt import DEFAULT_PASSES, ModulePass, PassStep


@dataclass(frozen=True)
class Original:
    program: object  # sirius.frontend.program.Program
    kernels: tuple[KernelInfo, ...]
    host: HostProgram


@dataclass
class FusedLaunchRecord:
    """One launch of the fused program that replaced several."""

    name: str
    arrangement: str  # vertical | horizontal | mixed
    level: int
    region: int
    nodes: list  # planner Nodes, in member order
    reasons: list[str]
    kernel: FusedKernel | None = None
    resources: dict[str, KernelResources] = field(default_factory=dict)  # arch -> ptxas
    owner: object = field(default=None, repr=False)  # the planner Cluster or Group


@dataclass
class FuseResult:
    files: tuple[Path, ...]
    options: Options
    original: Original
    analysed: HostProgram  # after storage splitting and wavefront rewriting
    uar: UAR  # of `analysed`
    host: HostProgram  # the fused host program
    device_ir: str  # the fused device module
    regions: list[Region]
    fused: list[FusedLaunchRecord]
    undone: list[str]  # fused kernels undone, with the reason
    storage: object | None
    wavefront: object | None
    ptx: str = ""
    syncs: object | None = None  # plan.syncs.SyncCrossing: the host syncs crossed and kept
    pruned: object | None = None  # plan.prune.PruneResult: the launches removed
    prepare: object | None = None  # plan.prepare.PrepareResult: the one-time prepare part
    resources: dict[str, KernelResources] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    passes: tuple[ModulePass, ...] = DEFAULT_PASSES  # the post-fusion pipeline
    postopt: tuple[PassStep, ...] = ()  # what each of its passes did (last round)
    megakernels: list[FusedLaunchRecord] = field(default_factory=list)  # --megakernel grid

    def original_resources(self) -> dict[str, KernelResources]:
        """ptxas resources of the original program's kernels for `options.arch` (compiled on
        first use, once per process and module: the fused module keeps only the kernels its
        host program launches, so a fused kernel's members are not in `resources`)."""
        return original_resources(self.original.program.device_ir, self.options.arch)

    @property
    def cooperative_kernels(self) -> tuple[str, ...]:
        """The kernels a GPU must launch cooperatively (cuLaunchCooperativeKernel): the grid
        megakernels, whose grid barriers need every block co-resident."""
        return tuple(rec.name for rec in self.megakernels)

    @property
    def kernels(self) -> tuple[KernelInfo, ...]:
        return self.original.kernels

    @property
    def launches_before(self) -> int:
        return launch_count(self.original.host.ops)

    @property
    def launches_after(self) -> int:
        return launch_count(self.host.ops)


@functools.lru_cache(maxsize=4)
def original_resources(device_ir: str, arch: str) -> dict[str, KernelResources]:
    """ptxas resources of every kernel of the device module `device_ir` for `arch` (compiled
    once per process and module: the report and the tuner's original both read them)."""
    from sirius.backend.ptx import compile_ir

    return dict(compile_ir(device_ir, arch)[1].kernels)
