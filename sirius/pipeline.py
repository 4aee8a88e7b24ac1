"""The whole compiler, stage after stage: the SIRIUS paper's Figure 2.

    program.cu -> frontend -> host model + kernel facts -> kernel summaries -> UAR
               -> fusion plan -> fused kernels -> post-fusion passes -> backend
               -> (verify) -> (tune)

Each stage is a function of its package that takes immutable values and returns one;
docs/architecture.md draws the packages and who may import whom. The CLI (`sirius/cli/`), the
Python API (`sirius/api.py`) and the scripts call this module; it calls the stages.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sirius.analysis.host.extract import extract_host_program
from sirius.analysis.irview import build_view
from sirius.analysis.kernel.facts import kernel_infos
from sirius.frontend import compile_program
from sirius.fusion.driver import (
    FuseResult,
    Original,
    generate,
    kernel_summaries_and_uar,
    plan_fusion,
)
from sirius.fusion.plan.planner import Options
from sirius.fusion.plan.prepare import params_for
from sirius.postopt import ModulePass

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def fuse(files: Sequence[Path | str], options: Options | None = None, *, entry: str = "main",
         flags: Sequence[str] = (), use_cache: bool = True,
         progress: Progress = _quiet, passes: Sequence[ModulePass] | None = None,
         argv: Sequence[str] | None = None,
         on_original: Callable[[Original], None] | None = None) -> FuseResult:
    """Compile, analyse and fuse a whole CUDA program; the result carries the original, the
    plan, the fused host program, the fused device module and its PTX. `passes`: the
    post-fusion pipeline (default `sirius.postopt.DEFAULT_PASSES`; `()` runs none); `argv`:
    the program's arguments (the host model, and so the fused program, is specialised to
    them). `on_original(original)` is called as soon as the original program is analysed
    (compiled, host model and kernel facts), before any fusion work: `sirius verify` starts the
    original's reference run there."""
    options = options or Options()
    paths = tuple(Path(f) for f in files)
    if options.params is None:  # the parameters of a `sirius import-tvm` program
        params, source = params_for(paths, None)
        options = dataclasses.replace(options, params=params, params_source=source)
    t0 = time.perf_counter()
    progress(f"analysing {', '.join(str(p) for p in paths)} for {options.arch}")
    program = compile_program(list(paths), arch=options.arch, extra_flags=list(flags),
                              use_cache=use_cache)                               # frontend
    device, host = build_view(program.device_module), build_view(program.host_module)
    kernels = kernel_infos(device)                                               # kernel facts
    host_program = extract_host_program(host, device, entry, argv)               # host model
    original = Original(program, tuple(kernels), host_program)
    if on_original is not None:
        on_original(original)
    analysed = kernel_summaries_and_uar(original)                # kernel summaries -> UAR
    analysis_seconds = time.perf_counter() - t0
    plan = plan_fusion(analysed, options, progress)              # fusion plan
    result = generate(plan, paths, progress, passes)  # fused kernels -> post-fusion passes
    #                                                    -> backend
    result.seconds["analysis"] = analysis_seconds
    return result


def verify(result: FuseResult, *, seed: int = 7, orders: Sequence[str] | None = None,
           exact: bool = False, progress: Progress = _quiet):
    """Run original and fused on the CPU executor on the same seeded inputs and compare."""
    from sirius.verify.differential import ORDERS, verify_fused

    return verify_fused(result.original, result, seed=seed,
                        orders=tuple(orders) if orders else ORDERS, progress=progress,
                        exact=exact)
