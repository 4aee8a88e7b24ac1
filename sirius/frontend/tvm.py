"""Import a TVM model as a whole CUDA program (`sirius import-tvm`; needs the `[tvm]` extra).

TVM compiles the model for CUDA as usual (`tvm.compile`, default pipeline); a pass instrument
keeps the Relax module after `LowerAllocTensor` and the TIR module after `tirx.SplitHostDevice`
(sirius.frontend.tvm_plan reads them). The CUDA source comes from the compiled executable. The
import checks itself before writing anything:

- the order of the PrimFunc calls equals the order in the VM bytecode of the executable;
- every launch's block size equals its kernel's `__launch_bounds__`;
- every kernel launched is in the CUDA source, with as many parameters as arguments.

`reference_outputs` runs the same Relax module through TVM's own `llvm` (CPU) build.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import re
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sirius.frontend.tvm_emit import emit_program, json_text, kernel_decls, plan_json
from sirius.frontend.tvm_model import Fill, ProgramPlan
from sirius.frontend.tvm_plan import TvmImportError, build_plan

DEFAULT_ARCH = "sm_80"


@dataclass(frozen=True)
class TvmModel:
    """A model to import: a Relax IRModule and the name of its function.

    Relax's `num_input` attribute says how many leading parameters are inputs; without it,
    `params` names the parameters. `amplitudes` overrides the amplitude of the host values of
    an input or parameter (by Relax name; see `default_amplitude`); `output_names` names the
    outputs (default `y`, or `y0`, `y1`, ...). `values` holds parameter values that matter
    for correctness (by Relax name): they replace the host fill in the reference `.npz`, which
    is what executors load (the generated host code keeps its deterministic fill)."""

    name: str
    module: Any  # tvm.IRModule
    function: str = "main"
    params: tuple[str, ...] | None = None
    amplitudes: dict[str, float] = field(default_factory=dict)
    output_names: tuple[str, ...] | None = None
    values: dict[str, np.ndarray] = field(default_factory=dict)


def from_nn(name: str, module: Any, inputs: dict[str, tuple[tuple[int, ...], str]],
            function: str = "forward", output_names: tuple[str, ...] | None = None,
            amplitudes: dict[str, float] | None = None) -> TvmModel:
    """A `tvm.relax.frontend.nn` module exported with static input shapes."""
    from tvm.relax.frontend import nn

    spec = {function: {k: nn.spec.Tensor(list(shape), dtype)
                       for k, (shape, dtype) in inputs.items()}}
    mod, params = module.export_tvm(spec=spec)
    return TvmModel(name, mod, function, tuple(n for n, _ in params), dict(amplitudes or {}),
                    output_names)


def load_model(ref: str, name: str | None = None) -> TvmModel:
    """`MODULE:FUNC`: FUNC() returns a TvmModel, `(IRModule, params)` (params: parameter names,
    or a dict of parameter values by name) or `(nn.Module, spec)` where spec maps input names
    to `(shape, dtype)` or `nn.spec.Tensor`."""
    if ":" not in ref:
        raise TvmImportError(f"expected MODULE:FUNC, got {ref!r}")
    mod_name, func_name = ref.split(":", 1)
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` does: MODULE may be local
    try:
        module = importlib.import_module(mod_name)
    except ImportError as e:
        raise TvmImportError(f"cannot import {mod_name}: {e}") from e
    factory: Callable | None = getattr(module, func_name, None)
    if factory is None:
        raise TvmImportError(f"{mod_name} has no function {func_name}")
    model = as_model(factory(), func_name)
    return dataclasses.replace(model, name=name) if name else model


def as_model(value: Any, name: str) -> TvmModel:
    import tvm
    from tvm.relax.frontend import nn

    if isinstance(value, TvmModel):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        first, second = value
        if isinstance(first, tvm.IRModule):
            if isinstance(second, dict):  # parameter values by name
                values = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v)
                          for k, v in second.items()}
                return TvmModel(name, first, _relax_function(first), tuple(values),
                                values=values)
            names = tuple(second) if second is not None else None
            return TvmModel(name, first, _relax_function(first), names)
        if isinstance(first, nn.Module):
            inputs = {}
            for k, s in dict(second).items():
                inputs[k] = (tuple(s.shape), s.dtype) if isinstance(s, nn.spec.Tensor) else s
            return from_nn(name, first, inputs)
    raise TvmImportError("FUNC must return a TvmModel, (IRModule, params) or "
                         "(nn.Module, {input: (shape, dtype)})")


def _relax_function(mod: Any) -> str:
    from tvm import relax

    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function)]
    if "main" in names or len(names) != 1:
        return "main"
    return names[0]


@dataclass(frozen=True)
class Capture:
    relax_function: Any  # after LowerAllocTensor
    host_funcs: dict     # PrimFunc name -> host PrimFunc after SplitHostDevice
    cuda_source: str
    vm_text: str
    tvm_version: str


def compile_cuda(model: TvmModel, arch: str = DEFAULT_ARCH) -> Capture:
    """Compile for CUDA with TVM's default pipeline, keeping the two snapshots sirius reads."""
    import tvm

    kept: dict[str, Any] = {}

    @tvm.ir.instrument.pass_instrument
    class _Keep:
        def run_after_pass(self, mod, info):
            if info.name in ("LowerAllocTensor", "tirx.SplitHostDevice"):
                kept[info.name] = mod

    # Stated explicitly (TVM's defaults for sm_80) so that dlight does not warn about them.
    target = tvm.target.Target({"kind": "cuda", "arch": arch,
                                "max_shared_memory_per_block": 49152,
                                "max_threads_per_block": 1024})
    with tvm.transform.PassContext(opt_level=3, instruments=[_Keep()]):
        ex = tvm.compile(model.module, target)
    if set(kept) != {"LowerAllocTensor", "tirx.SplitHostDevice"}:
        raise TvmImportError("TVM's pipeline did not run the passes sirius reads "
                             f"(kept {sorted(kept)})")
    split = kept["tirx.SplitHostDevice"]
    host_funcs = {gv.name_hint: f for gv, f in split.functions.items()
                  if f.attrs is not None and "calling_conv" not in f.attrs}
    cuda = _cuda_module(ex.mod)
    return Capture(kept["LowerAllocTensor"][model.function], host_funcs,
                   cuda.inspect_source(), ex.as_text(), tvm.__version__)


def _cuda_module(mod: Any) -> Any:
    if mod.kind == "cuda":
        return mod
    for sub in mod.imports:
        found = _cuda_module(sub)
        if found is not None:
            return found
    return None


def default_amplitude(shape: tuple[int, ...], is_param: bool) -> float:
    """Inputs in [-1, 1]; a weight (O, I, ...) of fan-in F = I*... in [-1/sqrt(F), 1/sqrt(F)];
    1-D parameters in [-0.5, 0.5]."""
    if not is_param:
        return 1.0
    if len(shape) >= 2:
        return 1.0 / float(np.sqrt(np.prod(shape[1:])))
    return 0.5


def fill_for(index: int, amplitude: float) -> Fill:
    """The host values of the `index`-th function parameter: k/1000 * amplitude, k a fixed
    pseudo-random pattern in [-1000, 1000] (sirius.frontend.tvm_model)."""
    return Fill(seed=(17 * index + 3) % 2001, scale=float(np.float32(amplitude / 1000.0)))


def plan_model(model: TvmModel, capture: Capture) -> ProgramPlan:
    def fill(index: int, name: str, shape: tuple[int, ...], is_param: bool) -> Fill:
        amp = model.amplitudes.get(name)
        return fill_for(index, default_amplitude(shape, is_param) if amp is None else amp)

    params = set(model.params) if model.params is not None else None
    return build_plan(model.name, capture.relax_function, capture.host_funcs, params,
                      model.output_names, fill)


def check_plan(plan: ProgramPlan, capture: Capture) -> None:
    """The import's self-checks (module docstring); raises TvmImportError."""
    decls = kernel_decls(capture.cuda_source)
    vm_calls = vm_call_order(capture.vm_text, capture.relax_function, set(capture.host_funcs))
    if vm_calls != list(plan.calls):
        raise TvmImportError("the PrimFunc call order differs from the VM bytecode: "
                             f"{list(plan.calls)} vs {vm_calls}")
    for launch in plan.launches:
        decl = decls.get(launch.kernel)
        if decl is None:
            raise TvmImportError(f"kernel {launch.kernel} is not in TVM's CUDA source")
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        if decl.launch_bounds != threads:
            raise TvmImportError(f"{launch.kernel}: block {launch.block} ({threads} threads) "
                                 f"differs from __launch_bounds__({decl.launch_bounds})")
        if len(decl.param_types) != len(launch.args):
            raise TvmImportError(f"{launch.kernel}: {len(launch.args)} arguments for "
                                 f"{len(decl.param_types)} parameters")


def vm_call_order(vm_text: str, rfunc: Any, primfuncs: set[str]) -> list[str]:
    """The PrimFuncs the VM bytecode of the function calls, in order."""
    name = str(rfunc.attrs["global_symbol"])
    section = re.search(rf"^@{re.escape(name)}:\n(.*?)(?:\n\n|\Z)", vm_text, re.S | re.M)
    if section is None:
        raise TvmImportError(f"function {name} is not in the VM bytecode")
    calls = re.findall(r"^\s*call\s+(\S+)\s+in:", section.group(1), re.M)
    return [c for c in calls if c in primfuncs]


@dataclass(frozen=True)
class ImportResult:
    plan: ProgramPlan
    cu_path: Path
    json_path: Path
    seconds: float
    kernels: int
    launches: int
    buffers: int


def import_model(model: TvmModel, out_dir: Path, command: str,
                 arch: str = DEFAULT_ARCH) -> ImportResult:
    """Compile, plan, check and write `out_dir/NAME.cu` and `out_dir/NAME.json`."""
    start = time.perf_counter()
    capture = compile_cuda(model, arch)
    plan = plan_model(model, capture)
    check_plan(plan, capture)
    decls = kernel_decls(capture.cuda_source)
    header = [f"{model.name}.cu -- TVM model imported by sirius import-tvm.",
              f"Generated by: {command}",
              f"TVM: apache-tvm {capture.tvm_version}, target cuda -arch={arch}, "
              f"function {model.function}.",
              f"{len({la.kernel for la in plan.launches})} kernels, {len(plan.launches)} "
              f"launches, {len(plan.buffers)} device buffers; roles and shapes in "
              f"{model.name}.json.",
              "Do not edit: regenerate instead."]
    meta = {"tvm_version": capture.tvm_version, "command": command, "arch": arch,
            "function": model.function}
    out_dir.mkdir(parents=True, exist_ok=True)
    cu = out_dir / f"{model.name}.cu"
    js = out_dir / f"{model.name}.json"
    cu.write_text(emit_program(plan, capture.cuda_source, header))
    js.write_text(json_text(plan_json(plan, decls, meta)))
    return ImportResult(plan, cu, js, time.perf_counter() - start,
                        len({la.kernel for la in plan.launches}), len(plan.launches),
                        len(plan.buffers))


def reference_outputs(model: TvmModel, plan: ProgramPlan) -> dict[str, np.ndarray]:
    """Inputs, parameters (keyed by device buffer name, the host's values) and the outputs of
    TVM's own llvm (CPU) build of the same module on them (keyed by output buffer name)."""
    import tvm
    from tvm import relax

    values = plan.host_values()
    by_relax = {b.relax_name: b.name for b in plan.buffers if b.fill is not None}
    for rname, value in model.values.items():
        buf = plan.buffer(by_relax[rname])
        if tuple(value.shape) != buf.shape or str(value.dtype) != buf.dtype:
            raise TvmImportError(f"value of {rname}: {value.dtype}{list(value.shape)}, "
                                 f"expected {buf.dtype}{list(buf.shape or ())}")
        values[buf.name] = value
    rfunc = model.module[model.function]
    ex = tvm.compile(model.module, tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(values[by_relax[p.name]]) for p in rfunc.params]
    result = vm[model.function](*args)
    outs = [result] if len(plan.outputs) == 1 else list(result)
    ref = dict(values)
    for o, r in zip(plan.outputs, outs, strict=True):
        ref[o.name] = r.numpy()
    return ref


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like np.savez_compressed, but byte-for-byte reproducible (fixed zip timestamps)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, buf.getvalue())
