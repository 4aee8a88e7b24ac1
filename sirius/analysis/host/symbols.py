"""Copies to and from `__device__` and `__constant__` variables (cudaMemcpyToSymbol,
cudaMemcpyFromSymbol and their Async forms) in the host model.

The symbol argument is the host shadow of the variable: a host global of the same IR name as
the device module's variable (clang gives both the same mangled name; the host IR of a
`--cuda-host-only` compile has no `__cudaRegisterVar` table, so the name is the link). A copy
becomes a `Copy` whose device side is `DevRef("@<IR name>", byte offset)`, the name the
dependence analysis gives a module global, and the program lists the variable in
`HostProgram.symbols` (source name, bytes, `__constant__` or `__device__`).
docs/host-model.md#symbols has the decisions.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import Copy, DevRef, Symbol
from sirius.analysis.host.values import AV, DevPtr, HostPtr, Int, Unknown, const
from sirius.analysis.irtypes import TypeParseError, type_size
from sirius.analysis.irview import Instr, ModuleView

if TYPE_CHECKING:
    from sirius.analysis.host.cudaapi import CudaRuntime

SYMBOL_COPIES = frozenset({"cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
                           "cudaMemcpyToSymbolAsync", "cudaMemcpyFromSymbolAsync"})
_KIND_NAMES = {0: "cudaMemcpyHostToHost", 1: "cudaMemcpyHostToDevice",
               2: "cudaMemcpyDeviceToHost", 3: "cudaMemcpyDeviceToDevice",
               4: "cudaMemcpyDefault"}
_SCALARS = {"i8", "i16", "i32", "i64", "half", "bfloat", "float", "double", "ptr", "i1"}
_DEF = re.compile(r"^(?:[\w\s]*?)addrspace\(([14])\) (?:[\w\s]*?)\b(global|constant) (.*)$")


def variable_name(symbol: str) -> str:
    """The source name of a global variable's symbol (`coef`, `_ZL4coef`: a static `coef`)."""
    m = re.fullmatch(r"_ZL?(\d+)(\w+)", symbol)
    return m[2][:int(m[1])] if m else symbol


def element_type(ty: str) -> str:
    """The scalar type of an array's elements (`[4 x [8 x float]]` -> `float`); "" for
    structs and vectors."""
    while True:
        m = re.fullmatch(r"\[\d+ x (.+)\]", ty.strip())
        if not m:
            break
        ty = m.group(1)
    return ty.strip() if ty.strip() in _SCALARS else ""


def device_variables(view: ModuleView) -> dict[str, Symbol]:
    """IR name -> the `__device__` (addrspace 1) and `__constant__` (addrspace 4) variables the
    device module defines, with their source names from the debug info."""
    out: dict[str, Symbol] = {}
    for name, g in view.globals.items():
        text = view.global_texts.get(name, "").split(" = ", 1)[-1]
        m = _DEF.match(text)
        if name.startswith("llvm.") or not m or " external " in f" {text} " or \
                re.search(r"\b(private|unnamed_addr)\b", text.split("addrspace", 1)[0]):
            continue
        try:
            size = type_size(g.type, view.struct_bodies)
        except TypeParseError:
            continue
        label = None
        dbg = re.search(r"!dbg !(\d+)", text)
        if dbg:
            var = view.debug.field(int(dbg.group(1)), "var")
            if var and var.startswith("!") and var[1:].isdigit():
                label = view.debug.string(int(var[1:]), "name")
        space = "__constant__" if m.group(1) == "4" or m.group(2) == "constant" \
            else "__device__"
        out[name] = Symbol("@" + name, label or variable_name(name), size, space,
                           element_type(g.type))
    return out


def symbol_copy(rt: CudaRuntime, name: str, args: list[AV], ins: Instr) -> AV:
    """The `Copy` of a cudaMemcpy{To,From}Symbol[Async] call (argument order: symbol, src,
    count, offset, kind[, stream] for To; dst, symbol, ... for From)."""
    to = "To" in name
    is_async = name.endswith("Async")
    if len(args) < 5:
        raise rt.error(f"{name} is called with {len(args)} arguments; sirius expects the five "
                       "of the CUDA runtime API (symbol, pointer, count, offset, kind)", ins)
    sym_av, other = (args[0], args[1]) if to else (args[1], args[0])
    sym = _symbol(rt, name, sym_av, ins)
    what = f"the {sym.space} variable '{sym.variable}'"
    nbytes = rt.bytes_of(args[2], ins, f"{name} of {what}")
    offset = _offset(rt, name, sym_av, args[3], ins, what)
    if nbytes.is_const and offset.is_const:
        lo, n = offset.const, nbytes.const
        if lo < 0 or n < 0 or lo + n > sym.bytes:
            at = f" at offset {lo}" if lo else ""
            raise rt.error(f"{name} copies {n} bytes{at} {'to' if to else 'from'} {what}, "
                           f"which has {sym.bytes} bytes", ins,
                           f"bytes [{lo}, {lo + n}) are outside [0, {sym.bytes}); CUDA "
                           "returns cudaErrorInvalidValue and copies nothing")
    device_side = _direction(rt, name, to, args[4], other, ins, what)
    rt.symbols[sym.name] = sym
    ref = DevRef(sym.name, offset)
    loc = rt.interp.loc(ins)
    if device_side:
        buf = rt.device_address(other, ins, f"the {'source' if to else 'destination'} of "
                                f"{name}")
        op = Copy("D2D", ref, buf, nbytes, is_async, loc) if to else \
            Copy("D2D", buf, ref, nbytes, is_async, loc)
    elif to:
        pointers, via = rt.device_addresses_in(other, nbytes, ins)
        op = Copy("H2D", ref, rt.host_ref(other), nbytes, is_async, loc, pointers, via)
    else:
        op = Copy("D2H", rt.host_ref(other), ref, nbytes, is_async, loc)
        if isinstance(other, HostPtr):
            rt.interp.mem.havoc(other.region, Unknown(
                f"'{other.region.name}' holds data copied from {what} at line "
                f"{loc.line if loc else '?'}", loc))
            rt.interp.mem.add_from_device(other.region, {sym.name})
    rt.interp.emit(op)
    if is_async and not device_side and not rt.interp.probing:
        region = other.region if isinstance(other, HostPtr) else None
        rt.interp.watch.async_copy(op.kind, region, rt.host_ref(other).name, loc)
    return const(0, 32)


def _symbol(rt: CudaRuntime, name: str, av: AV, ins: Instr) -> Symbol:
    if isinstance(av, HostPtr) and av.region.kind == "global":
        sym = rt.interp.device_vars.get(av.region.name)
        if sym is not None:
            return sym
        shown = variable_name(av.region.name)
        raise rt.error(f"the symbol of {name} is '{shown}', which is not a __device__ or "
                       "__constant__ variable of the device code", ins,
                       "pass the variable itself (cudaMemcpyToSymbol(coef, h, n)); a host "
                       "array gives cudaErrorInvalidSymbol")
    why = av.reason if isinstance(av, Unknown) else \
        f"host memory '{av.region.name}'" if isinstance(av, HostPtr) else "not a variable"
    raise rt.error(f"the symbol of {name} is not a __device__/__constant__ variable sirius "
                   f"can name ({why})", ins,
                   "pass the variable itself, not a pointer to it")


def _offset(rt: CudaRuntime, name: str, sym_av: AV, arg: AV, ins: Instr, what: str) -> Expr:
    assert isinstance(sym_av, HostPtr)
    if not sym_av.offset.is_const:
        raise rt.error(f"{name} names an element of {what} at an offset sirius cannot "
                       "follow", ins, "pass the variable and the byte offset argument")
    if not isinstance(arg, Int):
        why = arg.reason if isinstance(arg, Unknown) else "not an integer"
        raise rt.error(f"the offset of {name} into {what} is not a compile-time constant or "
                       f"an expression in loop variables ({why})", ins)
    return arg.e + sym_av.offset.const if sym_av.offset.const else arg.e


def _direction(rt: CudaRuntime, name: str, to: bool, kind: AV, other: AV, ins: Instr,
               what: str) -> bool:
    """Whether the other side of the copy is device memory (a device-to-device copy)."""
    k = kind.e.const if isinstance(kind, Int) and kind.e.is_const else 4
    plain = 1 if to else 2
    if k not in (plain, 3, 4):
        raise rt.error(f"{name} with kind {_KIND_NAMES.get(k, k)}: a copy "
                       f"{'to' if to else 'from'} {what} is "
                       f"{_KIND_NAMES[plain]} or cudaMemcpyDeviceToDevice", ins,
                       "CUDA returns cudaErrorInvalidMemcpyDirection and copies nothing")
    device = isinstance(other, DevPtr)
    side = "source" if to else "destination"
    if k == 3 and not device:
        where = f"host memory ('{other.region.name}')" if isinstance(other, HostPtr) else \
            "not a device pointer sirius can follow"
        raise rt.error(f"{name} with kind cudaMemcpyDeviceToDevice, but its {side} is "
                       f"{where}", ins)
    if k == plain and device:
        raise rt.error(f"{name} with kind {_KIND_NAMES[plain]}, but its {side} is device "
                       "memory: use cudaMemcpyDeviceToDevice (or cudaMemcpyDefault)", ins)
    return device
