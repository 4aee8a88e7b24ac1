"""What the CUDA runtime calls of host code mean for the host model.

Calls are assumed to succeed (they return cudaSuccess), so error-handling paths are not taken.
Launches arrive as clang lowers `k<<<g, b, smem, s>>>(args)`: __cudaPushCallConfiguration, then
the kernel's stub (often inlined), which pops the configuration into host memory and calls
cudaLaunchKernel with the stub's address and an array of pointers to the argument values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sirius.analysis.expr import Expr
from sirius.analysis.host.libcalls import is_allocator, is_readonly  # noqa: F401 (re-exported)
from sirius.analysis.host.model import (
    Address,
    Alloc,
    Arg,
    Buffer,
    BufferArg,
    Copy,
    DevRef,
    Free,
    HostRef,
    Launch,
    Loop,
    Memset,
    NullArg,
    Op,
    Rotating,
    ScalarArg,
    Symbol,
    Sync,
)
from sirius.analysis.host.ops import unpack_xy
from sirius.analysis.host.symbols import SYMBOL_COPIES, symbol_copy
from sirius.analysis.host.values import (
    AV,
    DevPtr,
    Flt,
    FuncPtr,
    HostPtr,
    Int,
    Null,
    Region,
    Unknown,
    const,
)
from sirius.analysis.irview import Instr, ModuleView, Value
from sirius.diagnostics import Location

if TYPE_CHECKING:
    from sirius.analysis.host.extract import Frame, HostInterpreter

NOT_HANDLED = object()

# CUDA runtime functions that neither emit an op nor change what the model knows (besides
# writing their out-parameters, which are then unknown).
_HARMLESS = {
    "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName",
    "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventElapsedTime",
    "cudaEventDestroy", "cudaEventQuery", "cudaGetDevice", "cudaSetDevice", "cudaGetDeviceCount",
    "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetAttribute",
    "cudaFuncGetAttributes", "cudaFuncSetAttribute", "cudaFuncSetCacheConfig",
    "cudaDeviceSetCacheConfig", "cudaDeviceSetSharedMemConfig", "cudaDeviceSetLimit",
    "cudaDeviceGetLimit", "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamDestroy",
    "cudaDeviceReset", "cudaMemGetInfo", "cudaRuntimeGetVersion", "cudaDriverGetVersion",
    "cudaProfilerStart", "cudaProfilerStop", "cudaSetDeviceFlags", "cudaFreeHost",
    "cudaHostRegister", "cudaHostUnregister", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxPotentialBlockSize", "cudaStreamQuery", "cudaChooseDevice",
    "cudaDeviceCanAccessPeer", "cudaInitDevice", "cudaCreateChannelDesc",
}
# Queries of the GPU: sirius compiles for no particular GPU, so what they return is unknown (and
# the cudaDeviceProp fields CUDA 13 removed are never filled: frontend/toolchain.py).
_PROPERTY = ("a device property ({}): sirius does not know the GPU's properties; give the "
             "value as a constant (or -D NAME=VALUE) where it sets a size or launch configuration")
_DEVICE_QUERY = {n: _PROPERTY.format(f"{n}()") for n in (
    "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetAttribute",
    "cudaFuncGetAttributes", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxPotentialBlockSize", "cudaDeviceGetLimit", "cudaMemGetInfo")}
_UNSUPPORTED = {
    "cudaMallocManaged": "managed memory (cudaMallocManaged) is not supported: sirius models "
                         "explicit device buffers and copies; use cudaMalloc and cudaMemcpy",
    "cudaMallocPitch": "pitched allocations (cudaMallocPitch) are not supported yet",
    "cudaMalloc3D": "3-D allocations (cudaMalloc3D) are not supported yet",
    "cudaMallocArray": "CUDA arrays (cudaMallocArray) are not supported: they back textures",
    "cudaMalloc3DArray": "CUDA arrays (cudaMalloc3DArray) are not supported: they back textures",
    "cudaBindTexture": "texture references are not supported",
    "cudaBindTexture2D": "texture references are not supported",
    "cudaBindTextureToArray": "texture references are not supported",
    "cudaCreateTextureObject": "texture objects are not supported: sirius analyses plain "
                               "global-memory accesses; read the array through a pointer",
    "cudaCreateSurfaceObject": "surface objects are not supported",
    "cudaGetSymbolAddress": "device pointers to __device__ variables (cudaGetSymbolAddress) "
                            "are not supported yet; cudaMemcpyToSymbol and "
                            "cudaMemcpyFromSymbol are",
    "cudaMemcpy2D": "2-D copies (cudaMemcpy2D) are not supported yet",
    "cudaMemcpy2DAsync": "2-D copies (cudaMemcpy2DAsync) are not supported yet",
    "cudaMemcpy3D": "3-D copies (cudaMemcpy3D) are not supported yet",
    "cudaMemcpyToArray": "CUDA arrays are not supported",
    "cudaMemcpy2DToArray": "CUDA arrays are not supported",
    "cudaGraphLaunch": "CUDA graphs are not supported",
    "cudaStreamBeginCapture": "CUDA graph capture is not supported",
    "cudaLaunchHostFunc": "host functions in streams (cudaLaunchHostFunc) are not supported",
    "cudaStreamAddCallback": "stream callbacks are not supported",
}
_NORETURN = {"exit", "abort", "_exit", "_Exit", "quick_exit", "__assert_fail", "__cxa_throw",
             "__cxa_rethrow", "_ZSt9terminatev", "__stack_chk_fail"}
def is_gpu_api(name: str) -> bool:
    return (name.startswith("cuda") or name.startswith("__cuda")) and name not in _HARMLESS


def is_noreturn(ins: Instr) -> bool:
    c = ins.callee
    return c is not None and c.kind == "func" and c.name in _NORETURN


_SUFFIX = re.compile(r"(\.addr|\.i\d*|\.\d+|\.sroa\.[\w.]*|\.coerce[\w.]*|\.lcssa)$")


def clean_name(name: str) -> str:
    prev = None
    while prev != name:
        prev, name = name, _SUFFIX.sub("", name)
    return "" if name.isdigit() else name


def address_taken_functions(view: ModuleView) -> set[str]:
    """Functions whose address flows somewhere other than a direct call or a CUDA runtime
    registration/launch call: the possible targets of an indirect call."""
    taken: set[str] = set()
    for fn in view.functions.values():
        for b in fn.blocks:
            for ins in b.instrs:
                callee = ins.callee
                if callee is not None and callee.kind == "func" and (
                        callee.name.startswith("cuda") or callee.name.startswith("__cuda")):
                    continue
                ops = ins.args if ins.opcode in ("call", "invoke") else ins.operands
                taken.update(o.name for o in ops if o.kind == "func")
    for text in view.global_texts.values():
        if "__cuda" in text:
            continue
        taken.update(n for n in re.findall(r"ptr @([-\w.$]+)", text) if n in view.functions)
    return taken


def init_global(interp: HostInterpreter, r: Region, text: str) -> None:
    """Constant initializers of host globals that host code may read (sizes, dims)."""
    m = re.search(r"(?:global|constant) (i\d+|float|double|ptr) (-?[\w.+]+)", text)
    if m:
        ty, v = m.groups()
        if ty.startswith("i") and re.fullmatch(r"-?\d+", v):
            interp.mem.store(r, 0, interp.types.size(ty), const(int(v), int(ty[1:])))
        elif ty == "ptr" and v == "null":
            interp.mem.store(r, 0, 8, Null())
        return
    m = re.search(r"(?:global|constant) \[(\d+) x (i\d+)\] \[(.*?)\]", text)
    if m:
        ty = m.group(2)
        size = interp.types.size(ty)
        for i, v in enumerate(re.findall(rf"{ty} (-?\d+)", m.group(3))):
            interp.mem.store(r, i * size, size, const(int(v), int(ty[1:])))


@dataclass(frozen=True)
class KernelSig:
    mangled: str
    name: str
    param_types: tuple[str, ...]
    param_names: tuple[str, ...]
    byval: tuple[bool, ...]


def kernel_signatures(device: ModuleView) -> dict[str, KernelSig]:
    out: dict[str, KernelSig] = {}
    for fn in device.functions.values():
        if fn.is_declaration or fn.calling_conv != "ptx_kernel":
            continue
        header = fn.text.split("{", 1)[0]
        name = device.source_name(fn)
        params = header[header.index("(") + 1: header.rindex(")")]
        pieces = [p for p in re.split(r",(?![^()]*\))", params) if p.strip()]
        out[fn.name] = KernelSig(
            fn.name, name or fn.name, tuple(a.type for a in fn.args),
            tuple(clean_name(a.name) or f"arg{a.index}" for a in fn.args),
            tuple("byval" in p for p in pieces))
    return out


def address_buffers(a: Address) -> set[str]:
    return {a.buffer} if isinstance(a, DevRef) else {c.buffer for c in a.choices}


def stub_to_kernel(stub: str) -> str:
    """clang names a kernel's host stub `__device_stub__<name>` inside the same mangling."""
    m = re.search(r"(\d+)__device_stub__", stub)
    if m:
        n = int(m.group(1)) - len("__device_stub__")
        return stub[:m.start()] + str(n) + stub[m.end():]
    return stub.replace("__device_stub__", "")


_SIZES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "bfloat": 2, "float": 4,
          "double": 8, "ptr": 8, "i1": 1}


class CudaRuntime:
    def __init__(self, interp: HostInterpreter):
        self.interp = interp
        self.pending: tuple | None = None
        self.config_loc: Location | None = None
        self.launch_loc: Location | None = None
        self.buffer_sizes: dict[str, int] = {}
        self.buffer_locs: dict[str, Location | None] = {}
        self.symbols: dict[str, Symbol] = {}  # the device variables symbol copies touch

    def snapshot(self):
        return (dict(self.buffer_sizes), dict(self.buffer_locs), dict(self.symbols),
                self.pending, self.config_loc)

    def restore(self, saved) -> None:
        sizes, locs, symbols, self.pending, self.config_loc = saved
        self.buffer_sizes, self.buffer_locs, self.symbols = sizes, locs, symbols

    def error(self, msg: str, ins: Instr, *notes: str):
        if self.launch_loc is not None:  # inside a launch: name the <<<...>>> line, not the stub
            from sirius.diagnostics import HostAnalysisError

            return HostAnalysisError(msg, self.launch_loc, notes)
        return self.interp.error(msg, ins, *notes)

    # dispatch --------------------------------------------------------------------------
    def call(self, frame: Frame, ins: Instr, name: str, args_v: list[Value], args: list[AV]):
        if name in _UNSUPPORTED:
            raise self.error(_UNSUPPORTED[name], ins)
        if name in SYMBOL_COPIES:
            return symbol_copy(self, name, args, ins)
        if name.startswith("llvm.memcpy") or name.startswith("llvm.memmove"):
            return self.host_memcpy(args, ins)
        if name.startswith("llvm.memset"):
            self.interp.touched(args[0], True, ins)
            self.clobber(args[0], args[2], ins, "set by memset")
            return Unknown("memset")
        if name in _HARMLESS:
            for a in args:
                if isinstance(a, HostPtr) and name != "cudaEventRecord":
                    self.interp.touched(a, True, ins)  # cudaFreeHost too: memory a copy uses
                if isinstance(a, HostPtr) and name not in ("cudaEventRecord", "cudaFreeHost"):
                    why = _DEVICE_QUERY.get(name, f"written by {name}()")
                    self.interp.mem.havoc(a.region, Unknown(why, self.interp.loc(ins)))
            return const(0, 32)
        handler = {"__cudaPushCallConfiguration": self._push_config,
                   "__cudaPopCallConfiguration": self._pop_config}.get(name) or \
            getattr(self, "_" + name, None)
        if handler is not None:
            return handler(frame, ins, args_v, args)
        if name.startswith("cuda") or name.startswith("__cuda"):
            raise self.error(f"sirius does not model the CUDA runtime function {name} yet", ins)
        return NOT_HANDLED

    # host memory -----------------------------------------------------------------------------
    def host_memcpy(self, args: list[AV], ins: Instr) -> AV:
        dst, src, n = args[0], args[1], args[2]
        mem = self.interp.mem
        self.interp.touched(src, False, ins)
        self.interp.touched(dst, True, ins)
        if isinstance(dst, HostPtr) and isinstance(src, HostPtr) and isinstance(n, Int) and \
                n.e.is_const and dst.offset.is_const and src.offset.is_const:
            cells = dict(mem.cells.get(src.region, {}))
            self.clobber(dst, n, ins, "copied from host memory sirius does not know")
            self.carry(dst, src)
            for off, (size, v) in cells.items():
                rel = off - src.offset.const
                if 0 <= rel and rel + size <= n.e.const:
                    mem.store(dst.region, dst.offset.const + rel, size, v)
            return Unknown("memcpy")
        self.clobber(dst, n, ins, "copied by memcpy")
        if isinstance(dst, HostPtr) and isinstance(src, HostPtr) and \
                mem.device_addresses(src.region):
            mem.taint(dst.region, Unknown(f"device addresses copied from '{src.region.name}' "
                                          "where sirius cannot follow them",
                                          self.interp.loc(ins)))
        self.carry(dst, src)
        return Unknown("memcpy")

    def carry(self, dst: AV, src: AV) -> None:
        """What a host copy moves besides its cells: taint and copied-back device bytes."""
        mem = self.interp.mem
        if isinstance(dst, HostPtr) and isinstance(src, HostPtr):
            if src.region in mem.tainted:
                mem.taint(dst.region, mem.tainted[src.region])
            mem.add_from_device(dst.region, mem.from_device.get(src.region, frozenset()))

    def clobber(self, dst: AV, n: AV, ins: Instr, why: str) -> None:
        u = Unknown(why, self.interp.loc(ins))
        if isinstance(dst, HostPtr):
            if dst.offset.is_const and isinstance(n, Int) and n.e.is_const:
                self.interp.mem.store(dst.region, dst.offset.const, max(n.e.const, 1), u)
            else:
                self.interp.mem.havoc(dst.region, u)

    # allocation ----------------------------------------------------------------------------
    def buffer_name(self, p: HostPtr) -> str:
        r = p.region
        base = r.name
        off = p.offset.const if p.offset.is_const else None
        if r.elem_type.endswith("x ptr]") and off is not None and off % 8 == 0:
            base = f"{base}[{off // 8}]"
        elif off:
            base = f"{base}+{off}"
        name, n = base, 1
        while name in self.buffer_sizes:
            n += 1
            name = f"{base}#{n}"
        return name

    def _cudaMalloc(self, frame, ins, args_v, args):
        slot, size = args[0], args[1]
        if not (isinstance(slot, HostPtr) and slot.offset.is_const):
            raise self.error("cudaMalloc stores the device pointer where sirius cannot follow "
                             "it", ins)
        name = self.buffer_name(slot)
        if not (isinstance(size, Int) and size.e.is_const):
            why = size.reason if isinstance(size, Unknown) else f"it is {size.e}" \
                if isinstance(size, Int) else "unknown"
            raise self.error(f"the allocation size of '{name}' is not a compile-time constant "
                             f"({why})", ins,
                             "sirius needs every buffer's size; make the size a constant")
        self.buffer_sizes[name] = size.e.const
        self.buffer_locs[name] = self.interp.loc(ins)
        self.interp.mem.store(slot.region, slot.offset.const, 8, DevPtr(DevRef(name)))
        self.interp.emit(Alloc(name, size.e.const, self.interp.loc(ins)))
        return const(0, 32)

    _cudaMallocAsync = _cudaMalloc

    def _cudaMallocHost(self, frame, ins, args_v, args):
        slot = args[0]
        if isinstance(slot, HostPtr) and slot.offset.is_const:
            r = Region(slot.region.name, "heap")
            self.interp.mem.store(slot.region, slot.offset.const, 8, HostPtr(r))
        return const(0, 32)

    _cudaHostAlloc = _cudaMallocHost

    def _cudaFree(self, frame, ins, args_v, args):
        if isinstance(args[0], Null):
            return const(0, 32)
        self.interp.emit(Free(self.device_address(args[0], ins, "cudaFree's pointer"),
                              self.interp.loc(ins)))
        return const(0, 32)

    _cudaFreeAsync = _cudaFree

    # copies ---------------------------------------------------------------------------------
    def device_address(self, av: AV, ins: Instr, what: str) -> Address:
        if isinstance(av, DevPtr):
            return av.addr
        if isinstance(av, HostPtr):
            raise self.error(f"{what} is host memory ('{av.region.name}'), not device memory",
                             ins)
        why = av.reason if isinstance(av, Unknown) else "a value that is not a pointer"
        raise self.error(f"{what} is a device pointer sirius cannot follow: {why}", ins)

    def bytes_of(self, av: AV, ins: Instr, what: str) -> Expr:
        if isinstance(av, Int):
            return av.e
        why = av.reason if isinstance(av, Unknown) else "not an integer"
        raise self.error(f"the size of this {what} is not a compile-time constant or an "
                         f"expression in loop variables ({why})", ins)

    def copy(self, ins: Instr, args: list[AV], is_async: bool) -> AV:
        dst, src, n, kind = args[0], args[1], args[2], args[3]
        k = kind.e.const if isinstance(kind, Int) and kind.e.is_const else None
        if k == 4 or k is None:  # cudaMemcpyDefault: the pointers say which way
            k = {(False, True): 1, (True, False): 2, (True, True): 3}.get(
                (isinstance(src, DevPtr), isinstance(dst, DevPtr)), 0)
        if k == 0:
            return self.host_memcpy([dst, src, n], ins)
        nbytes = self.bytes_of(n, ins, "copy")
        loc = self.interp.loc(ins)
        if k == 1:
            pointers, via = self.device_addresses_in(src, nbytes, ins)
            op = Copy("H2D", self.device_address(dst, ins, "the copy's destination"),
                      self.host_ref(src), nbytes, is_async, loc, pointers, via)
        elif k == 2:
            address = self.device_address(src, ins, "the copy's source")
            op = Copy("D2H", self.host_ref(dst), address, nbytes, is_async, loc)
            if isinstance(dst, HostPtr):
                self.interp.mem.havoc(dst.region, Unknown(
                    f"'{dst.region.name}' holds data copied from the device at line "
                    f"{loc.line if loc else '?'}", loc))
                self.interp.mem.add_from_device(dst.region, address_buffers(address))
        else:
            op = Copy("D2D", self.device_address(dst, ins, "the copy's destination"),
                      self.device_address(src, ins, "the copy's source"), nbytes, is_async, loc)
        self.interp.emit(op)
        if is_async and k in (1, 2) and not self.interp.probing:
            host = src if k == 1 else dst
            region = host.region if isinstance(host, HostPtr) else None
            self.interp.watch.async_copy(op.kind, region, self.host_ref(host).name, loc)
        return const(0, 32)

    def device_addresses_in(self, src: AV, nbytes: Expr, ins: Instr):
        from sirius.analysis.host.addresses import sent_addresses  # (it imports this module)

        return sent_addresses(self.interp.mem, src, nbytes,
                              lambda msg, *notes: self.error(msg, ins, *notes))

    def host_ref(self, av: AV) -> HostRef:
        return HostRef(av.region.name if isinstance(av, HostPtr) else "host")

    def _cudaMemcpy(self, frame, ins, args_v, args):
        return self.copy(ins, args, False)

    def _cudaMemcpyAsync(self, frame, ins, args_v, args):
        return self.copy(ins, args, True)

    def memset(self, ins: Instr, args: list[AV], is_async: bool) -> AV:
        dst = self.device_address(args[0], ins, "cudaMemset's pointer")
        v = args[1]
        if not (isinstance(v, Int) and v.e.is_const):
            raise self.error("cudaMemset's value is not a compile-time constant", ins)
        self.interp.emit(Memset(dst, v.e.const & 0xFF, self.bytes_of(args[2], ins, "memset"),
                                is_async, self.interp.loc(ins)))
        return const(0, 32)

    def _cudaMemset(self, frame, ins, args_v, args):
        return self.memset(ins, args, False)

    def _cudaMemsetAsync(self, frame, ins, args_v, args):
        return self.memset(ins, args, True)

    # synchronization ---------------------------------------------------------------------------
    def _cudaDeviceSynchronize(self, frame, ins, args_v, args):
        self.interp.emit(Sync("device", self.interp.loc(ins)))
        return const(0, 32)

    def _cudaStreamSynchronize(self, frame, ins, args_v, args):
        self.interp.emit(Sync("stream", self.interp.loc(ins)))
        return const(0, 32)

    def _cudaEventSynchronize(self, frame, ins, args_v, args):
        self.interp.emit(Sync("event", self.interp.loc(ins)))
        return const(0, 32)

    def _cudaStreamWaitEvent(self, frame, ins, args_v, args):
        return const(0, 32)

    # launches ------------------------------------------------------------------------------------
    def _push_config(self, frame, ins, args_v, args):
        self.pending = (args[0], args[1], args[2], args[3], args[4], self.interp.loc(ins))
        return const(0, 32)

    def _pop_config(self, frame, ins, args_v, args):
        if self.pending is None:
            raise self.error("a kernel stub ran without a launch configuration", ins)
        gxy, gz, bxy, bz, smem, loc = self.pending
        self.pending = None
        self.config_loc = loc
        mem = self.interp.mem
        for slot, xy, z in ((args[0], gxy, gz), (args[1], bxy, bz)):
            if isinstance(slot, HostPtr) and slot.offset.is_const:
                x, y = unpack_xy(xy, self.interp.ranges)
                for i, v in enumerate((x, y, z)):
                    mem.store(slot.region, slot.offset.const + 4 * i, 4, v)
        if isinstance(args[2], HostPtr) and args[2].offset.is_const:
            mem.store(args[2].region, args[2].offset.const, 8, smem)
        if isinstance(args[3], HostPtr) and args[3].offset.is_const:
            mem.store(args[3].region, args[3].offset.const, 8, Null())
        return const(0, 32)

    def _cudaLaunchKernel(self, frame, ins, args_v, args):
        func, gxy, gz, bxy, bz, argv, smem = args[:7]
        loc = self.config_loc or self.interp.loc(ins)
        self.config_loc = None
        self.launch_loc = loc
        try:
            return self.launch(ins, func, gxy, gz, bxy, bz, argv, smem, loc)
        finally:
            self.launch_loc = None

    def launch(self, ins, func, gxy, gz, bxy, bz, argv, smem, loc) -> AV:
        if not isinstance(func, FuncPtr):
            raise self.error("launch through a function pointer: sirius cannot tell which "
                             "kernel this launch runs", ins)
        kname = stub_to_kernel(func.name)
        sig = self.interp.kernels.get(kname)
        if sig is None:
            raise self.error(f"launched kernel {kname} is not in the device code", ins)
        grid = self.dims(gxy, gz, ins, f"grid of {sig.name}")
        block = self.dims(bxy, bz, ins, f"block of {sig.name}")
        smem_e = self.bytes_of(smem, ins, "dynamic shared memory")
        launch_args = tuple(self.kernel_args(sig, argv, ins))
        self.interp.emit(Launch(sig.name, sig.mangled, grid, block, smem_e, launch_args, loc))
        return const(0, 32)

    _cudaLaunchCooperativeKernel = _cudaLaunchKernel

    def dims(self, xy: AV, z: AV, ins: Instr, what: str) -> tuple[Expr, Expr, Expr]:
        x, y = unpack_xy(xy, self.interp.ranges)
        out = []
        for axis, v in zip("xyz", (x, y, z), strict=True):
            if not isinstance(v, Int):
                why = v.reason if isinstance(v, Unknown) else "not an integer"
                raise self.error(f"the {what} ({axis}) is not known: {why}", ins)
            out.append(v.e)
        return out[0], out[1], out[2]

    def kernel_args(self, sig: KernelSig, argv: AV, ins: Instr) -> list[Arg]:
        mem = self.interp.mem
        if not (isinstance(argv, HostPtr) and argv.offset.is_const):
            raise self.error(f"the argument array of the launch of {sig.name} cannot be "
                             "followed", ins)
        out: list[Arg] = []
        for i, (ty, pname, byval) in enumerate(zip(sig.param_types, sig.param_names, sig.byval,
                                                   strict=True)):
            if byval:
                raise self.error(f"kernel {sig.name} takes '{pname}' as a struct by value; "
                                 "sirius does not support struct kernel arguments yet", ins)
            slot = mem.load(argv.region, argv.offset.const + 8 * i, 8, "argument slot")
            if not (isinstance(slot, HostPtr) and slot.offset.is_const):
                raise self.error(f"argument {i} of {sig.name} cannot be followed", ins)
            v = mem.load(slot.region, slot.offset.const, _SIZES.get(ty, 8), "argument value")
            out.append(self.to_arg(v, ty, pname, sig, ins))
        return out

    def to_arg(self, v: AV, ty: str, pname: str, sig: KernelSig, ins: Instr) -> Arg:
        if isinstance(v, DevPtr):
            return BufferArg(v.addr)
        if isinstance(v, Null):
            return NullArg()
        if isinstance(v, Int) and ty != "ptr":
            return ScalarArg(ty, v.e)
        if isinstance(v, Flt):
            return ScalarArg(ty, v.v)
        if isinstance(v, HostPtr):
            raise self.error(f"argument '{pname}' of {sig.name} is host memory "
                             f"('{v.region.name}'), not a device pointer", ins)
        why = v.reason if isinstance(v, Unknown) else "a value sirius does not track"
        if isinstance(v, Unknown) and v.loc is not None:
            why += f" (line {v.loc.line})"
        raise self.error(f"argument '{pname}' of {sig.name} is not known: {why}", ins,
                         "sirius needs every launch argument as a device buffer + offset or "
                         "a constant (possibly depending on host loop variables)")

    # buffers -------------------------------------------------------------------------------
    def finish_buffers(self) -> list[Buffer]:
        inputs: set[str] = set()
        outputs: set[str] = set()

        def names(a) -> list[str]:
            if isinstance(a, DevRef):
                return [a.buffer]
            if isinstance(a, Rotating):
                return [c.buffer for c in a.choices]
            return []

        def walk(ops: tuple[Op, ...] | list[Op]) -> None:
            for op in ops:
                if isinstance(op, Loop):
                    walk(op.body)
                elif isinstance(op, Copy) and op.kind == "H2D":
                    inputs.update(names(op.dst))
                elif isinstance(op, Copy) and op.kind == "D2H":
                    outputs.update(names(op.src))

        walk(self.interp.ops[0])
        out = []
        for i, (name, size) in enumerate(self.buffer_sizes.items()):
            role = "output" if name in outputs else "input" if name in inputs else "temp"
            out.append(Buffer(i, name, size, role, self.buffer_locs.get(name)))
        return out
