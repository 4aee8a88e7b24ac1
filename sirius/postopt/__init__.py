"""Post-fusion passes: transforms of a fused device module (LLVM IR text), one file per pass,
run by one pass manager (docs/passes.md).

    from sirius.postopt import DEFAULT_PASSES, PassContext, parse_pipeline, run_pipeline
    passes = parse_pipeline("llvm-opt{level=3,rounds=2}")      # or DEFAULT_PASSES
    result = run_pipeline(fused_ir, passes, PassContext(arch="sm_90"))
    result.text                                               # verified after every pass

`sirius opt IN.ll -p PIPELINE` runs a pipeline on a file (`sirius/cli/opt.py`).

DEFAULT_PASSES is the post-fusion pass list fused-kernel code generation runs
(`sirius.fusion.codegen.emit.build`): the one place it is written down, until `sirius.pipeline`
owns it. The post-fusion optimizations of issue 14 go into it, before the final `llvm-opt`.
"""

from __future__ import annotations

from sirius.postopt.alias_facts import AliasFacts
from sirius.postopt.base import (
    HostRewrite,
    IRError,
    ModulePass,
    PassContext,
    PassError,
    PassInput,
    parse_ir,
    verify_ir,
)
from sirius.postopt.contract import Contract
from sirius.postopt.contract_shared import ContractShared
from sirius.postopt.host_constants import HostConstants
from sirius.postopt.licm import Licm
from sirius.postopt.llvm_opt import LlvmOpt
from sirius.postopt.loop_fuse import LoopFuse
from sirius.postopt.manager import PassStep, PipelineResult, run_pipeline
from sirius.postopt.parse import PipelineError, format_pipeline, parse_pipeline
from sirius.postopt.registry import PASSES, describe

__all__ = [
    "DEFAULT_PASSES", "PASSES", "HostRewrite", "IRError", "LlvmOpt", "ModulePass", "PassContext",
    "PassError", "PassInput", "PassStep", "PipelineError", "PipelineResult", "default_passes",
    "describe", "format_pipeline", "parse_ir", "parse_pipeline", "run_pipeline", "verify_ir",
]

# host-constants: verified on kernels/*.cu, kernels/tvm/*.cu and 60 random programs, fewer
# dynamic instructions where it applies (BENCHMARKS.md, "Post-fusion: host-constants ...").
# alias-facts: verified on kernels/*.cu, the small TVM programs (bert_qkv, lstm, mlp,
# resnext_block) and 40 random programs (BENCHMARKS.md, "Post-fusion: alias-facts ...").
# contract (after LLVM has forwarded same-thread stores to loads; one more LLVM round cleans
# up after it): verified on kernels/*.cu, the small TVM programs (bert_qkv, lstm, mlp,
# resnext_block, seq2seq) and 60 random programs (BENCHMARKS.md, "Post-fusion: contract ...").
# contract-shared (after contract: a temporary whose every read LLVM forwarded is contract's;
# one read back from another thread of the block is this pass's): issue 14 item 6, BLOCK width.
# loop-fuse (after LLVM has inlined the fragments; before contract, which then sees the loads a
# merged loop no longer needs): BENCHMARKS.md, "Post-fusion: the whole corpus".
# licm (last: the Reassociate pass of another llvm-opt round would undo its grouping): fewer
# instructions than LLVM's own LICM leaves on qkv_branches and bert_layer, no program worse,
# verified on the corpus in 3 orders and 750 random programs (BENCHMARKS.md, "Post-fusion,
# again").
DEFAULT_PASSES: tuple[ModulePass, ...] = (
    HostConstants(),
    AliasFacts(),
    LlvmOpt(level=3, rounds=2),
    LoopFuse(),
    Contract(),
    ContractShared(),
    LlvmOpt(level=3, rounds=1),
    Licm(),
)


def default_passes(opt_level: int = 3, *, host: bool = True) -> tuple[ModulePass, ...]:
    """The post-fusion pass list at an optimization level: DEFAULT_PASSES at 3; below, LLVM's
    pipeline at that level once (level 0, the planner's quick trial builds: only unused
    internal functions removed). `host=False`: without the passes that need the host program
    (a module built on its own, not inside `sirius fuse`); an `llvm-opt` that followed only to
    clean up after such a pass goes with it."""
    if opt_level == 3:
        if not host:
            out: list[ModulePass] = []
            for p in DEFAULT_PASSES:
                if p.requires or out and isinstance(p, LlvmOpt) and isinstance(out[-1], LlvmOpt):
                    continue
                out.append(p)
            return tuple(out)
        return DEFAULT_PASSES
    if opt_level not in (0, 1, 2):
        raise ValueError(f"optimization level {opt_level}: expected 0, 1, 2 or 3")
    return (LlvmOpt(level=opt_level, rounds=2 if opt_level else 1),)
