"""Abstract values of the host interpreter and the host memory they live in.

A host value is known exactly (an integer expression over loop variables, a float, a device
address, a host address, a function), or it is `Unknown` with the reason why: an Unknown that
reaches a launch, a copy or an allocation is reported to the user, never guessed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import DevRef, Rotating
from sirius.diagnostics import Location


@dataclass(frozen=True, slots=True)
class Int:
    e: Expr
    bits: int = 64


@dataclass(frozen=True, slots=True)
class Flt:
    v: float


@dataclass(frozen=True, slots=True)
class FltInt:
    """A float that is an integer quotient rounded: fl(e / den) in a format with `mant`
    significand bits (24: float, 53: double). Made only where |e| < 2^mant over the host loop
    ranges and 1 <= den < 2^mant (floats.py proves it): then the conversions are exact and the
    rounded quotient lies strictly between the same two integers as e / den, so ceil, floor and
    truncation of it are integer ceil/floor division of e by den."""

    e: Expr
    mant: int
    den: int = 1


@dataclass(frozen=True, slots=True)
class DevPtr:
    addr: DevRef | Rotating


_region_ids = itertools.count()


@dataclass(eq=False)
class Region:
    """A piece of host memory: a local variable, a global, a heap block."""

    name: str
    kind: str  # alloca | global | heap
    elem_type: str = ""
    id: int = field(default_factory=lambda: next(_region_ids))

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name}>"


@dataclass(frozen=True, slots=True)
class HostPtr:
    region: Region
    offset: Expr = Expr(0)


@dataclass(frozen=True, slots=True)
class FuncPtr:
    name: str


@dataclass(frozen=True, slots=True)
class Null:
    pass


@dataclass(frozen=True, slots=True)
class Packed:
    """An i64 holding two i32 halves, as clang passes dim3's x and y."""

    lo: AV
    hi: AV


@dataclass(frozen=True, slots=True)
class Unknown:
    reason: str
    loc: Location | None = None


AV = Int | Flt | FltInt | DevPtr | HostPtr | FuncPtr | Null | Packed | Unknown


def const(v: int, bits: int = 64) -> Int:
    return Int(Expr(wrap(v, bits)), bits)


def wrap(v: int, bits: int) -> int:
    """Two's-complement value of `v` in `bits` bits, read as signed (i1 reads as 0/1)."""
    if bits == 1:
        return v & 1
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def int_bits(ty: str) -> int:
    return int(ty[1:]) if ty.startswith("i") and ty[1:].isdigit() else 64


def mentions(av: AV, names: set[str]) -> bool:
    if isinstance(av, Int | FltInt):
        return bool(av.e.variables() & names)
    if isinstance(av, DevPtr):
        a = av.addr
        if isinstance(a, DevRef):
            return bool(a.offset.variables() & names)
        return bool(a.index.variables() & names) or any(c.offset.variables() & names
                                                        for c in a.choices)
    if isinstance(av, HostPtr):
        return bool(av.offset.variables() & names)
    if isinstance(av, Packed):
        return mentions(av.lo, names) or mentions(av.hi, names)
    return False


def substitute(av: AV, env: dict[str, Expr]) -> AV:
    if isinstance(av, Int):
        return Int(av.e.substitute(env), av.bits)
    if isinstance(av, FltInt):
        return FltInt(av.e.substitute(env), av.mant, av.den)
    if isinstance(av, DevPtr):
        return DevPtr(substitute_addr(av.addr, env))
    if isinstance(av, HostPtr):
        return HostPtr(av.region, av.offset.substitute(env))
    if isinstance(av, Packed):
        return Packed(substitute(av.lo, env), substitute(av.hi, env))
    return av


def substitute_addr(a: DevRef | Rotating, env: dict[str, Expr]) -> DevRef | Rotating:
    if isinstance(a, DevRef):
        return DevRef(a.buffer, a.offset.substitute(env))
    index = a.index.substitute(env)
    choices = tuple(DevRef(c.buffer, c.offset.substitute(env)) for c in a.choices)
    if index.is_const:
        return choices[index.const % len(choices)]
    return Rotating(choices, index)


def offset_addr(a: DevRef | Rotating, delta: Expr) -> DevRef | Rotating:
    if isinstance(a, DevRef):
        return DevRef(a.buffer, a.offset + delta)
    return Rotating(tuple(DevRef(c.buffer, c.offset + delta) for c in a.choices), a.index)


class Memory:
    """Host memory as cells (region, byte offset) -> (size, value). Only constant offsets are
    tracked; a store at an unknown offset makes the whole region unknown.

    Device addresses in host memory are followed too, because a copy to the device can carry
    them: a region `tainted` may hold device addresses at places sirius does not know (a copy of
    it to the device is refused), and `from_device` names the device buffers whose bytes were
    copied back into a region (they may hold addresses the kernels stored)."""

    def __init__(self) -> None:
        self.cells: dict[Region, dict[int, tuple[int, AV]]] = {}
        self.havocked: dict[Region, Unknown] = {}
        self.tainted: dict[Region, Unknown] = {}
        self.from_device: dict[Region, frozenset[str]] = {}

    def taint(self, region: Region, why: Unknown) -> None:
        self.tainted.setdefault(region, why)

    def add_from_device(self, region: Region, buffers) -> None:
        if buffers:
            self.from_device[region] = self.from_device.get(region, frozenset()) | \
                frozenset(buffers)

    def device_addresses(self, region: Region) -> bool:
        """Whether the region may hold a device address the host wrote."""
        return region in self.tainted or any(
            isinstance(v, DevPtr) for _, v in self.cells.get(region, {}).values())

    def store(self, region: Region, offset: int, size: int, value: AV) -> None:
        cells = self.cells.setdefault(region, {})
        for off in [o for o, (s, _) in cells.items() if o < offset + size and offset < o + s]:
            del cells[off]
        cells[offset] = (size, value)

    def load(self, region: Region, offset: int, size: int, why_unknown: str) -> AV:
        cells = self.cells.get(region, {})
        if offset in cells and cells[offset][0] == size:
            return cells[offset][1]
        if size == 8 and cells.get(offset, (0,))[0] == 4 and cells.get(offset + 4, (0,))[0] == 4:
            return Packed(cells[offset][1], cells[offset + 4][1])
        if region in self.havocked:
            return self.havocked[region]
        return Unknown(why_unknown)

    def havoc(self, region: Region, why: Unknown) -> None:
        self.cells.pop(region, None)
        self.havocked[region] = why

    def havoc_cell(self, region: Region, offset: int, size: int, why: Unknown) -> None:
        self.store(region, offset, size, why)

    def map_values(self, fn) -> None:
        for cells in self.cells.values():
            for off, (size, v) in list(cells.items()):
                cells[off] = (size, fn(v))
