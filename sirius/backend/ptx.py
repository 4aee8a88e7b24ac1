"""PTX from an NVPTX LLVM module, through llvmlite's NVPTX target (no nvcc, no NVVM).

Steps (each on a freshly parsed and verified module):

1. Retarget: clang-22 writes `"target-cpu"="sm_80" "target-features"="+ptx88,+sm_80"` on every
   function, and the NVPTX backend selects instructions per function from these, so they are
   rewritten to the requested architecture; the PTX ISA version is the module's own (the highest
   `+ptxNN` it carries) or the architecture's minimum, whichever is higher.
2. Debug info: clang's full debug info makes the backend write `.target sm_80, debug`, which
   ptxas compiles like `-G` (measured: matmul 41 registers instead of 32). The compile unit is
   turned into `DebugDirectivesOnly`: PTX keeps `.loc` line directives (nvcc's `-lineinfo`),
   code is compiled as in a release build. `lineinfo=False` drops them too.
3. libdevice: when the module calls `__nv_*` functions, `$CUDA/nvvm/libdevice/libdevice.10.bc`
   is linked in; every function it defined becomes internal so that the unused ones disappear.
4. Optimization: LLVM's pipeline at `opt_level` (default 3) with the NVPTX target machine, whose
   callbacks add NVVMReflect (resolving libdevice's `__nvvm_reflect("__CUDA_FTZ")` from the
   module flag `nvvm-reflect-ftz`) and inline the libdevice bodies.
5. `emit_assembly` with the NVPTX target machine (cpu = arch, features = `+ptxNN`).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from sirius.analysis.irview import closure, definitions, without_definitions
from sirius.backend.ptxas import PtxasReport, assemble
from sirius.diagnostics import SiriusError, ToolchainError
from sirius.frontend import llvmctx

TRIPLE = "nvptx64-nvidia-cuda"

# The lowest PTX ISA version that knows each architecture (PTX ISA manual, "Release notes").
MIN_PTX = {"sm_70": 60, "sm_72": 61, "sm_75": 63, "sm_80": 70, "sm_86": 71, "sm_87": 74,
           "sm_89": 78, "sm_90": 78}


class BackendError(SiriusError):
    """The NVPTX backend could not produce PTX for a module."""


@dataclass(frozen=True, slots=True)
class PtxModule:
    arch: str
    ptx_version: int  # 88 = PTX ISA 8.8
    text: str
    kernels: tuple[str, ...]
    libdevice: bool  # libdevice was linked in

    def assemble(self) -> PtxasReport:
        return assemble(self.text, self.arch)


@functools.cache
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.cache
def target_machine(arch: str, ptx: int) -> llvm.TargetMachine:
    _init()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=f"+ptx{ptx}", opt=3)


def libdevice_path() -> Path:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (p := Path(root) / "nvvm" / "libdevice" / "libdevice.10.bc").exists():
            return p
    raise ToolchainError("libdevice.10.bc was not found under $CUDA_HOME/nvvm/libdevice or "
                         "/usr/local/cuda/nvvm/libdevice; set CUDA_HOME to the toolkit's root")


@functools.cache
def _libdevice_bytes() -> bytes:
    return libdevice_path().read_bytes()


def ptx_version_for(ir: str, arch: str) -> int:
    have = [int(v) for v in re.findall(r"\+ptx(\d+)", ir)]
    if arch not in MIN_PTX:
        raise BackendError(f"unknown architecture {arch} (known: {', '.join(MIN_PTX)})")
    return max([MIN_PTX[arch], *have])


def retarget(ir: str, arch: str, ptx: int, lineinfo: bool = True) -> str:
    """`ir` with every function's target attributes set to `arch` / `+ptxNN,+arch` and the
    debug info reduced to line directives (or dropped)."""
    text = re.sub(r'"target-cpu"="[^"]*"', f'"target-cpu"="{arch}"', ir)
    text = re.sub(r'"target-features"="[^"]*"', f'"target-features"="+ptx{ptx},+{arch}"', text)
    kind = "DebugDirectivesOnly" if lineinfo else "NoDebug"
    return re.sub(r"emissionKind: (FullDebug|LineTablesOnly)", f"emissionKind: {kind}", text)


def parse(ir: str, what: str = "module") -> llvm.ModuleRef:
    _init()
    try:
        mod = llvmctx.parse(ir)
        mod.verify()
    except RuntimeError as e:
        raise BackendError(f"the {what} is not valid LLVM IR: {str(e).strip()}") from e
    return mod


def link_libdevice(mod: llvm.ModuleRef) -> bool:
    """Link libdevice into `mod` when it calls `__nv_*`; its functions become internal. Only
    the functions called and those they call are linked: the rest would be dropped by the
    optimizer anyway, after costing a parse, a link and passes (most of a small module's PTX
    time)."""
    wanted = frozenset(f.name for f in mod.functions
                       if f.is_declaration and f.name.startswith("__nv_"))
    if not wanted:
        return False
    _, bodies = _libdevice_text()
    missing = sorted(wanted - set(bodies))
    if missing:
        raise BackendError(f"libdevice does not define {', '.join(missing)}")
    lib = llvmctx.parse(_libdevice_part(wanted), llvmctx.context_of(mod))
    lib.triple = mod.triple
    lib.data_layout = mod.data_layout
    defined = {f.name for f in lib.functions if not f.is_declaration}
    mod.link_in(lib)
    for f in mod.functions:
        if f.name in defined and not f.is_declaration:
            f.linkage = llvm.Linkage.internal
    return True


@functools.cache
def _libdevice_text() -> tuple[str, dict[str, str]]:
    """libdevice as LLVM IR text, and its definitions by name."""
    _init()
    text = str(llvmctx.parse_bitcode(_libdevice_bytes()))
    return text, definitions(text)


@functools.lru_cache(maxsize=256)
def _libdevice_part(wanted: frozenset[str]) -> str:
    """libdevice's text with only the definitions of `wanted` and what they call."""
    text, bodies = _libdevice_text()
    return without_definitions(text, closure(wanted, bodies))


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> None:
    """LLVM's default pipeline at `level` (0 still removes unused internal functions)."""
    if level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    else:
        pm = llvm.create_new_module_pass_manager()
        pm.add_global_dead_code_eliminate_pass()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        pm.run(mod, pb)


def emit_ptx(ir: str | llvm.ModuleRef, arch: str = "sm_80", *, opt_level: int = 3,
             lineinfo: bool = True, ptx_version: int | None = None) -> PtxModule:
    """PTX for every kernel of the NVPTX module `ir` (text or module; not modified)."""
    text = ir if isinstance(ir, str) else str(ir)
    ptx = ptx_version or ptx_version_for(text, arch)
    mod = parse(retarget(text, arch, ptx, lineinfo))
    if mod.triple != TRIPLE:
        raise BackendError(f"the module targets {mod.triple!r}, not {TRIPLE}")
    tm = target_machine(arch, ptx)
    linked = link_libdevice(mod)
    optimize(mod, tm, opt_level)
    try:
        mod.verify()
    except RuntimeError as e:
        raise BackendError(f"the optimized module does not verify: {e}") from e
    kernels = _kernels(text, mod)
    try:
        asm = tm.emit_assembly(mod)
    except RuntimeError as e:
        raise BackendError(f"the NVPTX backend failed for {arch}: {e}") from e
    return PtxModule(arch, ptx, asm, kernels, linked)


_KERNEL_DEFINE = re.compile(r'^define\b[^@\n]*\bptx_kernel\b[^@\n]*@("(?:[^"\\]|\\.)*"|[-\w.$]+)\(',
                            re.M)


def _kernels(text: str, mod: llvm.ModuleRef) -> tuple[str, ...]:
    """The kernels (ptx_kernel definitions) of `text` that `mod`, its optimized module, still
    defines, in module order. Read from the text: printing each function of a paper-shape
    module to find its calling convention took a second."""
    out = []
    for m in _KERNEL_DEFINE.finditer(text):
        name = m.group(1)
        if name.startswith('"'):  # a quoted name: \XX escapes
            name = re.sub(r"\\([0-9A-Fa-f]{2})", lambda e: chr(int(e.group(1), 16)), name[1:-1])
        try:
            if not mod.get_function(name).is_declaration:
                out.append(name)
        except NameError:  # removed by the optimizer
            pass
    return tuple(out)


def compile_ir(ir: str | llvm.ModuleRef, arch: str = "sm_80", **kw) -> tuple[PtxModule,
                                                                           PtxasReport]:
    """`emit_ptx` then `ptxas -v`: the PTX and its per-kernel resources."""
    mod = emit_ptx(ir, arch, **kw)
    return mod, mod.assemble()
