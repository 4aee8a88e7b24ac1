"""What a compiled TVM model does on the device, read from TVM's own IR (needs apache-tvm).

Two snapshots of TVM's pipeline are read:

- the Relax function after `LowerAllocTensor`: `alloc_storage` (sizes in bytes) and
  `alloc_tensor` (a tensor at a byte offset into a storage) say where every tensor lives; calls
  of PrimFuncs (outputs last) say what runs, in order; `reshape`/`view` are zero-copy aliases;
- the host PrimFuncs after `tirx.SplitHostDevice`: each holds `call_ffi_kernel` calls whose
  arguments are the kernel's pointers (buffers declared on the PrimFunc's parameters) and whose
  trailing values are the launch dimensions tagged by `launch_params`.

The result is a `ProgramPlan` (sirius.frontend.tvm_model): buffers with roles, and launches
whose pointer arguments are (buffer, byte offset).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from sirius.diagnostics import SiriusError
from sirius.frontend.tvm_model import (
    FILL_DTYPES,
    DeviceBuffer,
    Fill,
    KernelLaunch,
    LaunchArg,
    OutputCopy,
    ProgramPlan,
    dtype_bytes,
)


class TvmImportError(SiriusError):
    """The TVM model uses something `sirius import-tvm` does not translate."""


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a Relax tensor lives: a device buffer and a byte offset."""

    buffer: str
    offset: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * dtype_bytes(self.dtype)


@dataclass(frozen=True, slots=True)
class _HostCall:
    """One `call_ffi_kernel` of a host PrimFunc, arguments in the kernel's order."""

    kernel: str
    args: tuple[tuple[str, int | float | tuple[int, int]], ...]  # ("param", (index, byte off))
    launch: tuple[tuple[str, int], ...]  # (tag, value)


def c_identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if not ident[:1].isdigit() else "_" + ident


def static_shape(shape_expr) -> tuple[int, ...]:
    vals = getattr(shape_expr, "values", shape_expr)
    out = []
    for v in vals:
        if not isinstance(v, tvm.tirx.IntImm | int):
            raise TvmImportError(f"dynamic shape {shape_expr} is not supported: give every "
                                 "input a static shape")
        out.append(int(v))
    return tuple(out)


def _tensor_type(var) -> tuple[tuple[int, ...], str]:
    ty = var.ty
    if not isinstance(ty, relax.TensorType):
        raise TvmImportError(f"parameter {var.name} is not a tensor ({ty})")
    return static_shape(ty.shape), str(ty.dtype)


# host PrimFuncs ------------------------------------------------------------------------------
def host_calls(func) -> list[_HostCall]:
    """The kernel launches of one host PrimFunc (after SplitHostDevice), in program order."""
    params = list(func.params)
    declared: list[tuple[object, int, int]] = []  # (buffer var, param index, byte offset)
    calls: list[_HostCall] = []

    roots: list[tuple[object, int]] = []  # parameter buffer var seen in the body -> index

    def param_index(var) -> int:
        for i, p in enumerate(params):
            if var.same_as(p):
                return i
        for seen, i in roots:
            if seen.same_as(var):
                return i
        # After SplitHostDevice the body's buffer vars are not the parameter objects; the
        # body declares them in parameter order, so match names in order (names may repeat:
        # split has T_split_sections four times).
        start = roots[-1][1] + 1 if roots else 0
        for i in range(start, len(params)):
            if params[i].name == var.name:
                roots.append((var, i))
                return i
        raise TvmImportError(f"{func_name(func)}: cannot tell which parameter {var.name} is")

    def resolve(ptr) -> tuple[int, int]:
        if not (isinstance(ptr, tvm.ir.Call) and ptr.op.name == "tirx.buffer_data"):
            raise TvmImportError(f"{func_name(func)}: kernel pointer {ptr} is not a buffer")
        var = ptr.args[0]
        for buf, index, off in declared:
            if buf.same_as(var):
                return index, off
        return param_index(var), 0

    def visit(stmt) -> None:
        if isinstance(stmt, tvm.tirx.SeqStmt):
            for s in stmt.seq:
                visit(s)
        elif isinstance(stmt, tvm.tirx.DeclBuffer):
            buf = stmt.buffer
            index, base = resolve(buf.data)
            off = buf.elem_offset
            if not isinstance(off, tvm.tirx.IntImm | int):
                raise TvmImportError(f"{func_name(func)}: non-constant buffer offset {off}")
            declared.append((buf, index, base + int(off) * dtype_bytes(str(buf.dtype))))
        elif isinstance(stmt, tvm.tirx.Evaluate):
            calls.append(_kernel_call(func, stmt.value, resolve))
        else:
            raise TvmImportError(f"{func_name(func)}: host code {type(stmt).__name__} is not "
                                 "supported (only kernel launches)")

    visit(func.body)
    return calls


def func_name(func) -> str:
    attrs = func.attrs
    return str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs \
        else "<PrimFunc>"


def _kernel_call(func, call, resolve) -> _HostCall:
    if not (isinstance(call, tvm.ir.Call) and call.op.name == "tirx.call_ffi_kernel"):
        raise TvmImportError(f"{func_name(func)}: host call {call} is not a kernel launch")
    tags = [str(t) for t in call.attrs.launch_params]
    values = list(call.args[len(call.args) - len(tags):])
    launch = []
    for tag, v in zip(tags, values, strict=True):
        if not isinstance(v, tvm.tirx.IntImm):
            raise TvmImportError(f"{func_name(func)}: launch value {tag} = {v} is not constant")
        launch.append((tag, int(v)))
    args: list = []
    for a in call.args[1:len(call.args) - len(tags)]:
        if isinstance(a, tvm.tirx.IntImm):
            args.append(("int", int(a)))
        elif isinstance(a, tvm.tirx.FloatImm):
            args.append(("float", float(a)))
        else:
            args.append(("param", resolve(a)))
    return _HostCall(str(call.args[0].value), tuple(args), tuple(launch))


# the Relax function ----------------------------------------------------------------------------
@dataclass
class _Walk:
    name: str
    places: dict[int, _Place]          # id(relax var) -> place
    storages: dict[int, str]           # id(storage var) -> buffer name
    buffers: dict[str, DeviceBuffer]
    storage_tensors: dict[str, list[str]]
    launches: list[KernelLaunch]
    calls: list[str]                   # PrimFunc names in call order
    tuples: dict[int, list] = field(default_factory=dict)  # id(var) -> tuple fields


def _key(var) -> int:
    return var.id_ if hasattr(var, "id_") else id(var)


def build_plan(name: str, rfunc, host_funcs: dict, param_names: set[str] | None,
               output_names: tuple[str, ...] | None,
               fill: Callable[[int, str, tuple[int, ...], bool], Fill]) -> ProgramPlan:
    """The program plan of Relax function `rfunc` (after LowerAllocTensor); `host_funcs` maps
    PrimFunc names to their host PrimFuncs (after SplitHostDevice). Leading parameters are
    inputs (Relax's `num_input`, else those not in `param_names`); `fill(index, name, shape,
    is_param)` gives the host values of each."""
    walk = _Walk(name, {}, {}, {}, {}, [], [])
    num_input = rfunc.attrs["num_input"] if rfunc.attrs is not None \
        and "num_input" in rfunc.attrs else None
    for i, p in enumerate(rfunc.params):
        shape, dtype = _tensor_type(p)
        if dtype not in FILL_DTYPES:
            raise TvmImportError(f"parameter {p.name} is {dtype}: only "
                                 f"{', '.join(FILL_DTYPES)} inputs and parameters are "
                                 "supported (the host fills those)")
        is_param = (i >= int(num_input)) if num_input is not None \
            else (param_names is not None and p.name in param_names)
        role = "param" if is_param else "input"
        buf = ("d_param_" if is_param else "d_in_") + c_identifier(p.name)
        if buf in walk.buffers:
            raise TvmImportError(f"two parameters are named {p.name}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype_bytes(dtype)
        walk.buffers[buf] = DeviceBuffer(buf, role, nbytes, dtype, shape, p.name,
                                         fill(i, p.name, shape, is_param))
        walk.places[_key(p)] = _Place(buf, 0, shape, dtype)
    body = rfunc.body
    for block in body.blocks:
        for binding in block.bindings:
            if not isinstance(binding, relax.VarBinding):
                raise TvmImportError(f"{type(binding).__name__} bindings are not supported")
            _bind(walk, binding.var, binding.value, host_funcs)
    outputs = _outputs(walk, body.body, output_names)
    buffers = tuple(_finish_storage(b, walk.storage_tensors) for b in walk.buffers.values())
    return ProgramPlan(name, buffers, tuple(walk.launches), outputs, tuple(walk.calls))


def _bind(walk: _Walk, var, value, host_funcs: dict) -> None:
    if isinstance(value, relax.Var):
        if _key(value) in walk.places:
            walk.places[_key(var)] = walk.places[_key(value)]
        elif _key(value) in walk.storages:
            walk.storages[_key(var)] = walk.storages[_key(value)]
        return
    if isinstance(value, relax.Tuple):
        walk.tuples[_key(var)] = list(value.fields)
        return
    if isinstance(value, relax.TupleGetItem):
        fields = walk.tuples.get(_key(value.tuple_value))
        if fields is None:
            raise TvmImportError(f"binding {var.name}: tuple element of an unknown tuple")
        _bind(walk, var, fields[int(value.index)], host_funcs)
        return
    if not isinstance(value, relax.Call):
        raise TvmImportError(f"binding {var.name} = {type(value).__name__} is not supported")
    op = value.op
    if isinstance(op, relax.GlobalVar):
        _launch(walk, str(op.name_hint), value.args, host_funcs)
        return
    opname = getattr(op, "name", str(op))
    args = value.args
    if opname == "relax.memory.alloc_storage":
        k = sum(1 for b in walk.buffers.values() if b.role == "temp")
        buf = f"d_storage{k}"
        size = static_shape(args[0])[0]
        walk.buffers[buf] = DeviceBuffer(buf, "temp", size, "uint8", None, var.name, None)
        walk.storages[_key(var)] = buf
        walk.storage_tensors[buf] = []
    elif opname == "relax.memory.alloc_tensor":
        buf = walk.storages[_key(args[0])]
        offset = int(args[1])
        shape = static_shape(args[2])
        dtype = str(args[3].value)
        place = _Place(buf, offset, shape, dtype)
        if offset + place.nbytes > walk.buffers[buf].bytes:
            raise TvmImportError(f"tensor {var.name} ({place.nbytes} B at {offset}) does not "
                                 f"fit its storage of {walk.buffers[buf].bytes} B")
        walk.places[_key(var)] = place
        walk.storage_tensors[buf].append(var.name)
    elif opname in ("relax.reshape", "relax.memory.view"):
        src = walk.places[_key(args[0])]
        shape, dtype = _tensor_type(var)
        if dtype != src.dtype or int(np.prod(shape)) != int(np.prod(src.shape)):
            raise TvmImportError(f"{opname} {var.name} is not a zero-copy view")
        walk.places[_key(var)] = _Place(src.buffer, src.offset, shape, dtype)
    else:
        raise TvmImportError(f"Relax operation {opname} (binding {var.name}) is not supported")


def _launch(walk: _Walk, prim: str, args, host_funcs: dict) -> None:
    if prim not in host_funcs:
        raise TvmImportError(f"call of {prim}, which is not a PrimFunc with kernels")
    places = []
    for a in args:
        if not isinstance(a, relax.Var) or _key(a) not in walk.places:
            raise TvmImportError(f"argument {a} of {prim} is not a tensor sirius placed")
        places.append(walk.places[_key(a)])
    walk.calls.append(prim)
    for hc in host_calls(host_funcs[prim]):
        largs = []
        for kind, v in hc.args:
            if kind == "param":
                index, off = v
                p = places[index]
                largs.append(LaunchArg(p.buffer, p.offset + off, None))
            else:
                largs.append(LaunchArg(None, 0, v))
        dims = dict(hc.launch)
        unknown = set(dims) - {"blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x",
                               "threadIdx.y", "threadIdx.z", "tirx.use_dyn_shared_memory"}
        if unknown:
            raise TvmImportError(f"{hc.kernel}: unknown launch parameters {sorted(unknown)}")
        grid = tuple(dims.get(f"blockIdx.{c}", 1) for c in "xyz")
        block = tuple(dims.get(f"threadIdx.{c}", 1) for c in "xyz")
        smem = dims.get("tirx.use_dyn_shared_memory", 0)
        walk.launches.append(KernelLaunch(hc.kernel, prim, grid, block, smem, tuple(largs)))


def _outputs(walk: _Walk, ret, names: tuple[str, ...] | None) -> tuple[OutputCopy, ...]:
    if isinstance(ret, relax.Var) and _key(ret) in walk.tuples:
        rets = walk.tuples[_key(ret)]
    elif isinstance(ret, relax.Var):
        rets = [ret]
    else:
        rets = list(getattr(ret, "fields", []))
    if any(not isinstance(r, relax.Var) or _key(r) not in walk.places for r in rets):
        raise TvmImportError("the function must return a tensor or a tuple of tensors")
    if not rets:
        raise TvmImportError(f"unsupported return value {ret}")
    if names is None:
        names = ("y",) if len(rets) == 1 else tuple(f"y{i}" for i in range(len(rets)))
    if len(names) != len(rets):
        raise TvmImportError(f"{len(names)} output names for {len(rets)} outputs")
    outs = []
    for var, oname in zip(rets, names, strict=True):
        place = walk.places[_key(var)]
        buf = walk.buffers[place.buffer]
        out = "d_out_" + c_identifier(oname)
        own = buf.role == "temp" and place.offset == 0 and \
            len(walk.storage_tensors[buf.name]) == 1 and place.nbytes == buf.bytes
        if own:  # TVM gave the output a storage of its own: that storage is the output
            walk.buffers = {(out if k == buf.name else k): v for k, v in walk.buffers.items()}
            walk.buffers[out] = DeviceBuffer(out, "output", buf.bytes, place.dtype, place.shape,
                                             oname, None)
            walk.storage_tensors[out] = walk.storage_tensors.pop(buf.name)
            _rename(walk, buf.name, out)
            outs.append(OutputCopy(out, None, 0, place.nbytes, place.shape, place.dtype))
        else:  # copied device-to-device into an output buffer first
            walk.buffers[out] = DeviceBuffer(out, "output", place.nbytes, place.dtype,
                                             place.shape, oname, None)
            outs.append(OutputCopy(out, place.buffer, place.offset, place.nbytes, place.shape,
                                   place.dtype))
    return tuple(outs)


def _rename(walk: _Walk, old: str, new: str) -> None:
    def fix(a: LaunchArg) -> LaunchArg:
        return LaunchArg(new, a.offset, a.scalar) if a.buffer == old else a

    walk.launches = [KernelLaunch(launch.kernel, launch.primfunc, launch.grid, launch.block,
                                  launch.smem, tuple(fix(a) for a in launch.args))
                     for launch in walk.launches]
    walk.places = {k: (_Place(new, p.offset, p.shape, p.dtype) if p.buffer == old else p)
                   for k, p in walk.places.items()}


def _finish_storage(buf: DeviceBuffer, tensors: dict[str, list[str]]) -> DeviceBuffer:
    if buf.name not in tensors:
        return buf
    return DeviceBuffer(buf.name, buf.role, buf.bytes, buf.dtype, buf.shape, buf.relax_name,
                        buf.fill, tuple(tensors[buf.name]))
