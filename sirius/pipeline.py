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
from sirius.analysis.host.model import HostProgram
from sirius.analysis.irview import build_view
from sirius.analysis.kernel.facts import kernel_infos
from sirius.frontend import compile_program
from sirius.fusion.driver import (
    Analysed,
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


def analyse(files: Sequence[Path | str], options: Options | None = None, *,
            entry: str = "main", flags: Sequence[str] = (), use_cache: bool = True,
            progress: Progress = _quiet, argv: Sequence[str] | None = None,
            on_original: Callable[[Original], None] | None = None) -> Analysed:
    """The program up to its UAR (frontend, host model, kernel facts, kernel summaries): what
    every fusion of it starts from, whatever its options. `fuse(..., analysed=a)` reuses one
    (the tuner and the random-program tests fuse a program several ways); it is not changed
    by fusing. `on_original` as for `fuse`."""
    options = options or Options()
    paths = [Path(f) for f in files]
    t0 = time.perf_counter()
    progress(f"analysing {', '.join(str(p) for p in paths)} for {options.arch}")
    program = compile_program(paths, arch=options.arch, extra_flags=list(flags),
                              use_cache=use_cache)                               # frontend
    device, host = build_view(program.device_module), build_view(program.host_module)
    kernels = kernel_infos(device)                                               # kernel facts
    host_program = extract_host_program(host, device, entry, argv)               # host model
    original = Original(program, tuple(kernels), host_program)
    if on_original is not None:
        on_original(original)
    analysed = kernel_summaries_and_uar(original)                # kernel summaries -> UAR
    return dataclasses.replace(analysed, seconds=time.perf_counter() - t0)


def fuse(files: Sequence[Path | str], options: Options | None = None, *, entry: str = "main",
         flags: Sequence[str] = (), use_cache: bool = True,
         progress: Progress = _quiet, passes: Sequence[ModulePass] | None = None,
         argv: Sequence[str] | None = None,
         on_original: Callable[[Original], None] | None = None,
         on_device_ir: Callable[[str, HostProgram], None] | None = None,
         analysed: Analysed | None = None) -> FuseResult:
    """Compile, analyse and fuse a whole CUDA program; the result carries the original, the
    plan, the fused host program, the fused device module and its PTX. `passes`: the
    post-fusion pipeline (default `sirius.postopt.DEFAULT_PASSES`; `()` runs none); `argv`:
    the program's arguments (the host model, and so the fused program, is specialised to
    them). `on_original(original)` is called as soon as the original program is analysed
    (compiled, host model and kernel facts), before any fusion work: `sirius verify` starts the
    original's reference run there. `on_device_ir(text, host)` is called with the fused device
    IR and host program of each round of code generation once the post-fusion passes are done,
    before PTX (the last call has the result's): `sirius verify` starts building the fused
    program's executor module there. `analysed`: `analyse`'s result for these files, entry,
    flags, argv and arch, reused instead of analysing again (its seconds are reported)."""
    options = options or Options()
    paths = tuple(Path(f) for f in files)
    if options.params is None:  # the parameters of a `sirius import-tvm` program
        params, source = params_for(paths, None)
        options = dataclasses.replace(options, params=params, params_source=source)
    if analysed is None:
        analysed = analyse(paths, options, entry=entry, flags=flags, use_cache=use_cache,
                           progress=progress, argv=argv, on_original=on_original)
    elif on_original is not None:
        on_original(analysed.original)
    plan = plan_fusion(analysed, options, progress)              # fusion plan
    result = generate(plan, paths, progress, passes, on_device_ir)  # fused kernels -> passes
    #                                                    -> backend
    result.seconds["analysis"] = analysed.seconds
    return result


def verify(result: FuseResult, *, seed: int = 7, orders: Sequence[str] | None = None,
           exact: bool = False, progress: Progress = _quiet):
    """Run original and fused on the CPU executor on the same seeded inputs and compare."""
    from sirius.verify.differential import ORDERS, verify_fused

    return verify_fused(result.original, result, seed=seed,
                        orders=tuple(orders) if orders else ORDERS, progress=progress,
                        exact=exact)
