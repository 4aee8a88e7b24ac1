"""Code generation of fused kernels on LLVM IR: `build(device_ir, specs) -> FusedModule`.

    from sirius.fusion.codegen.emit import build
    from sirius.fusion.spec import FusedKernelSpec, Member, GLOBAL
    spec = FusedKernelSpec("chain", "vertical", (
        Member("_Z5scalePKfPffi", grid=(32, 1, 1), block=(128, 1, 1), param_map=(0, 1, 2, 3),
               mapping=GLOBAL),
        Member("_Z4reluPfi", grid=(64, 1, 1), block=(64, 1, 1), param_map=(1, 3),
               mapping=GLOBAL)))
    fused = build(program.device_ir, [spec])
    fused.text                     # original kernels + `chain`, O3-optimized, verified
    k = fused.kernel("chain")      # grid, block, smem, params (with the members they serve)
    k.launch([launch_scale, launch_relu])   # the host Launch that replaces the two

The spec types (`FusedKernelSpec`, `Member`, `ThreadMap`) are documented in
`sirius.fusion.spec`, and the whole design in docs/fusion-codegen.md. In short:

- every member becomes an internal *fragment*: a copy of its kernel taking its thread/block ids
  and dims as twelve named i32 parameters (`%__sirius.tid.x` .. `%__sirius.nctaid.z`) instead
  of reading `llvm.nvvm.read.ptx.sreg.*`; callees are inlined into it first;
- the fused kernel (ptx_kernel, `"nvvm.maxntid"` = its block size) computes for each member the
  ids of the instance the running thread executes (`sirius.fusion.geometry`), guards the call
  with the checks that can fail, and calls the fragment: VERTICAL = every member in turn in the
  same thread (a block barrier before a member that asks for one); HORIZONTAL = consecutive
  block ranges of the fused grid, each running one member with its block id offset;
- a fragment with barriers that only some threads of a block run gets counted barriers
  (`llvm.nvvm.barrier.cta.sync.count(id, n)`, `bar.sync id, n`; one id per such fragment), so
  the threads that skip it cannot deadlock it; it must run on whole warps;
- static shared arrays move into one buffer per fused kernel: members one after another
  (vertical) or all at offset 0 (horizontal: one member per block; `share_smem`);
- the fused kernel's parameters are the union of the members', merged where the spec maps two
  member parameters to one fused index (the same host value);
- the module is parsed and verified after every step, then the post-fusion passes run on it
  (`sirius.postopt.DEFAULT_PASSES`: LLVM's O3 pipeline on the NVPTX target machine, twice: the
  fragments inline in the first round, loads across them are forwarded in the second),
  verified after each, and it is printed.

Errors a user (or the planner) can act on raise `CodegenError`, naming the fused kernel, the
member and the reason. `python -m sirius.fusion.codegen.emit IN.ll --spec JSON` runs the pass on a
file (the lit tests use it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import llvmlite.binding as llvm

from sirius.analysis.irview import ModuleView, build_view, definitions
from sirius.backend.ptx import ptx_version_for, target_machine
from sirius.diagnostics import SiriusError
from sirius.frontend import llvmctx
from sirius.fusion.codegen.assemble import Assembler
from sirius.fusion.codegen.fragment import make_fragments
from sirius.fusion.spec import CodegenError, FusedKernelSpec, FusedModule
from sirius.postopt import ModulePass, PassContext, PassError, default_passes, run_pipeline

__all__ = ["CodegenError", "FuseKernels", "build", "keep_launched", "main"]


# entry point ------------------------------------------------------------------------------------
def build(device_ir: str, specs: Sequence[FusedKernelSpec], *, opt_level: int = 3,
          passes: Sequence[ModulePass] | None = None) -> FusedModule:
    """The device module `device_ir` plus one kernel per spec, optimized and verified.
    `passes`: the post-fusion passes to run (default `default_passes(opt_level, host=False)`:
    those that need no host program; `()` leaves the assembled module as it is, for a caller
    that runs the passes itself, as `sirius fuse` does)."""
    base = _parse(device_ir, "input module")
    members = {m.kernel for s in specs for m in s.members}
    view = build_view(base, only=members)  # the members and what they call: all it reads
    _check_names(view, specs)
    # The module as LLVM prints it: named struct types parsed again in the same context get
    # suffixes (%struct.float2.3), and the fragments are printed with those names.
    text_a, frags, inlined = make_fragments(str(base), view, specs)
    mod = _parse(text_a, "module with fragments")
    arch = _arch(device_ir)
    tm = target_machine(arch, ptx_version_for(device_ir, arch))
    if inlined:
        pm = llvm.create_new_module_pass_manager()
        pm.add_always_inliner_pass()
        pm.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(0)))
        _verify(mod, "module after inlining callees into fragments")
    text_b = str(mod)
    view_b = build_view(mod, only=members | set(frags.values()))
    text_c, kernels = Assembler(text_b, view_b, specs, frags).run()
    mod = _parse(text_c, "fused module")
    # The post-fusion passes (sirius.postopt; at level 3 DEFAULT_PASSES: LLVM's O3 pipeline,
    # twice), verified after each; `mod` is handed over, not parsed again.
    try:
        todo = default_passes(opt_level, host=False) if passes is None else tuple(passes)
        text = run_pipeline(text_c, todo, PassContext(arch=arch), parsed=mod).text
    except PassError as e:
        raise CodegenError(f"fused module: {e.message}") from e
    return FusedModule(text, tuple(kernels), text_c)


@dataclass(frozen=True, slots=True)
class FuseKernels:
    """The pass form of `build` (for pipelines and `python -m sirius.fusion.codegen.emit`)."""

    name: ClassVar[str] = "fuse-kernels"
    specs: tuple[FusedKernelSpec, ...]
    opt_level: int = 3

    def run(self, device_ir: str) -> FusedModule:
        return build(device_ir, self.specs, opt_level=self.opt_level)


def keep_launched(text: str, launched: Collection[str]) -> str:
    """The module `text` without the kernels no launch of the fused host program uses (the
    members of fused kernels, the vertical kernels a megakernel took in) and what only they
    used: those become internal and LLVM's global dead-code elimination removes them (metadata
    that named them, `nvvm.annotations`, then names nothing). The post-fusion passes, the
    NVPTX backend and ptxas then work on what runs, not on every kernel of the original."""
    dead = {name for name, body in definitions(text).items() if name not in launched
            and re.match(r"define[^@{]*\bptx_kernel\b", body)}
    if not dead:
        return text
    mod = _parse(text, "fused module")
    for f in mod.functions:
        if f.name in dead:
            f.linkage = "internal"
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    arch = _arch(text)
    pm.run(mod, llvm.create_pass_builder(target_machine(arch, ptx_version_for(text, arch)),
                                         llvm.create_pipeline_tuning_options(0)))
    _verify(mod, "fused module without its unlaunched kernels")
    return str(mod)


# helpers --------------------------------------------------------------------------------------
def _parse(text: str, what: str) -> llvm.ModuleRef:
    try:
        mod = llvmctx.parse(text)
    except RuntimeError as e:
        raise CodegenError(f"the {what} does not parse: {str(e).strip()}") from e
    _verify(mod, what)
    return mod


def _verify(mod: llvm.ModuleRef, what: str) -> None:
    try:
        mod.verify()
    except RuntimeError as e:
        raise CodegenError(f"the {what} does not verify: {str(e).strip()}") from e


def _arch(text: str) -> str:
    m = re.search(r'"target-cpu"="(sm_\d+)"', text)
    return m.group(1) if m else "sm_80"


def _check_names(view: ModuleView, specs: Sequence[FusedKernelSpec]) -> None:
    seen: set[str] = set()
    for s in specs:
        if s.name in view.functions or s.name in view.globals or s.name in seen:
            raise CodegenError(f"fused kernel name {s.name} is already taken")
        if not re.fullmatch(r"[A-Za-z_$][-\w.$]*", s.name):
            raise CodegenError(f"fused kernel name {s.name!r} is not a plain identifier")
        seen.add(s.name)
        for i, m in enumerate(s.members):
            fn = view.functions.get(m.kernel)
            if fn is None or fn.is_declaration or fn.calling_conv != "ptx_kernel":
                raise CodegenError(f"{s.name}: member {i} names {m.kernel}, which is not a "
                                   "kernel of the module")
            if min(m.grid + m.block) < 1 or m.smem < 0:
                raise CodegenError(f"{s.name}: member {i} has grid {m.grid}, block {m.block}, "
                                   f"smem {m.smem}; dimensions must be positive")
            if m.barrier_before and s.arrangement == "horizontal":
                raise CodegenError(f"{s.name}: member {i} asks for a barrier before it, but "
                                   "horizontal members run in different blocks")
            if m.repeat != 1 and (m.repeat < 1 or s.arrangement != "horizontal"
                                  or m.mapping.kind != "block" or m.blocks is not None
                                  or len(m.strides) != len(fn.args)):
                raise CodegenError(f"{s.name}: member {i} repeats {m.repeat} times; a repeated "
                                   "member is horizontal, has the block map, and gives one "
                                   f"stride per parameter ({len(fn.args)})")
            if len(fn.args) != len(m.param_map or fn.args):
                raise CodegenError(f"{s.name}: member {i} ({m.kernel}) has {len(fn.args)} "
                                   f"parameters; its param_map has {len(m.param_map or ())}")


# command line (lit tests) -----------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sirius.fusion.codegen.emit",
                                 description="fuse kernels of an NVPTX LLVM IR file")
    ap.add_argument("input", type=Path)
    ap.add_argument("--spec", action="append", required=True,
                    help="a FusedKernelSpec as JSON (docs/fusion-codegen.md); repeatable")
    ap.add_argument("-O", dest="opt", type=int, default=3, help="optimization level (0: none)")
    ap.add_argument("--unoptimized", action="store_true",
                    help="print the module before the optimization pipeline")
    ap.add_argument("--summary", action="store_true", help="print the fused kernels as JSON")
    args = ap.parse_args(argv)
    try:
        specs = tuple(FusedKernelSpec.from_json(json.loads(s)) for s in args.spec)
        fused = FuseKernels(specs, args.opt).run(args.input.read_text())
    except SiriusError as e:
        print(e.render(), file=sys.stderr)
        return 2
    except (ValueError, KeyError) as e:
        print(f"error: bad spec: {e}", file=sys.stderr)
        return 2
    if args.summary:
        print(json.dumps([k.to_json() for k in fused.kernels], indent=1))
    else:
        print(fused.unoptimized if args.unoptimized else fused.text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
