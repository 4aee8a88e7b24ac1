"""The host program model: buffers and the ordered GPU operations of the host code.

Every value is frozen. Quantities that may depend on host loop variables (grid sizes, byte
offsets, copy sizes, scalar arguments, loop bounds) are `Expr`s; the JSON form prints a constant
as a number and anything else as an isl-syntax string. docs/host-model.md is the schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sirius.analysis.expr import Expr
from sirius.diagnostics import Location


@dataclass(frozen=True, slots=True)
class Buffer:
    id: int
    name: str
    bytes: int
    role: str  # input | output | temp  (see docs/host-model.md for the rule)
    loc: Location | None = None


@dataclass(frozen=True, slots=True)
class Symbol:
    """A `__device__` or `__constant__` variable of the device module that host code copies to
    or from (cudaMemcpyToSymbol / FromSymbol). Its bytes are the device address
    `DevRef(name, offset)`, as the dependence analysis names a module global."""

    name: str      # `@` + the IR name in the device module (`@coef`, `@_ZL5count`)
    variable: str  # the source name (`coef`, `count`)
    bytes: int
    space: str     # __constant__ | __device__
    elem: str = ""  # the LLVM scalar type of its elements (`float`, `i32`; "" if mixed)

    def to_json(self) -> dict:
        return {"name": self.name, "variable": self.variable, "bytes": self.bytes,
                "space": self.space, "elem": self.elem or None}


@dataclass(frozen=True, slots=True)
class DevRef:
    """A device address: a buffer and a byte offset into it."""

    buffer: str
    offset: Expr = Expr(0)

    def to_json(self) -> dict:
        return {"buffer": self.buffer, "offset": self.offset.to_json()}


@dataclass(frozen=True, slots=True)
class Rotating:
    """A device address that cycles through `choices` with the loop (ping-pong buffers):
    the address is `choices[index]`, `index` an expression in the loop variables."""

    choices: tuple[DevRef, ...]
    index: Expr

    def to_json(self) -> dict:
        return {"rotating": {"index": self.index.to_json(),
                             "choices": [c.to_json() for c in self.choices]}}

    def at(self, env: dict[str, int]) -> DevRef:
        return self.choices[self.index.evaluate(env) % len(self.choices)]


Address = DevRef | Rotating


@dataclass(frozen=True, slots=True)
class HostRef:
    """Host memory, named after the source variable where it is known."""

    name: str

    def to_json(self) -> dict:
        return {"host": self.name}


@dataclass(frozen=True, slots=True)
class BufferArg:
    address: Address

    def to_json(self) -> dict:
        return {"kind": "buffer", **self.address.to_json()}


@dataclass(frozen=True, slots=True)
class ScalarArg:
    type: str  # LLVM type of the parameter: i32, i64, float, double, ...
    value: Expr | float

    def to_json(self) -> dict:
        v = self.value.to_json() if isinstance(self.value, Expr) else self.value
        return {"kind": "scalar", "type": self.type, "value": v}


@dataclass(frozen=True, slots=True)
class NullArg:
    def to_json(self) -> dict:
        return {"kind": "null"}


Arg = BufferArg | ScalarArg | NullArg


def _loc(loc: Location | None) -> str | None:
    return str(loc) if loc else None


@dataclass(frozen=True, slots=True)
class Alloc:
    buffer: str
    bytes: int
    loc: Location | None = None

    def to_json(self) -> dict:
        return {"op": "alloc", "buffer": self.buffer, "bytes": self.bytes, "loc": _loc(self.loc)}


@dataclass(frozen=True, slots=True)
class Free:
    address: Address
    loc: Location | None = None

    def to_json(self) -> dict:
        return {"op": "free", **self.address.to_json(), "loc": _loc(self.loc)}


@dataclass(frozen=True, slots=True)
class Copy:
    """A copy. A host-to-device copy whose host bytes hold device addresses the host wrote
    lists them in `pointers`: (byte offset from the start of the copied bytes, the address held
    there as 8 bytes); one whose host bytes came back from the device (an earlier device-to-
    host copy into that host memory) names those device buffers in `via`."""

    kind: str  # H2D | D2H | D2D
    dst: Address | HostRef
    src: Address | HostRef
    bytes: Expr
    is_async: bool = False
    loc: Location | None = None
    pointers: tuple[tuple[int, Address], ...] = ()
    via: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {"op": "copy", "kind": self.kind, "dst": self.dst.to_json(),
               "src": self.src.to_json(), "bytes": self.bytes.to_json(),
               "async": self.is_async, "loc": _loc(self.loc)}
        if self.pointers:
            out["pointers"] = [{"at": off, **a.to_json()} for off, a in self.pointers]
        if self.via:
            out["via"] = list(self.via)
        return out


@dataclass(frozen=True, slots=True)
class Memset:
    dst: Address
    value: int
    bytes: Expr
    is_async: bool = False
    loc: Location | None = None

    def to_json(self) -> dict:
        return {"op": "memset", "dst": self.dst.to_json(), "value": self.value,
                "bytes": self.bytes.to_json(), "async": self.is_async, "loc": _loc(self.loc)}


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: str  # source name of the kernel (demangled)
    mangled: str
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    smem: Expr
    args: tuple[Arg, ...]
    loc: Location | None = None
    # part of the one-time prepare part: it computes only from the model's parameters
    # (sirius/fusion/plan/prepare.py); False: the per-inference part
    prepare: bool = False

    def to_json(self) -> dict:
        out = {"op": "launch", "kernel": self.kernel, "mangled": self.mangled,
               "grid": [g.to_json() for g in self.grid],
               "block": [b.to_json() for b in self.block],
               "smem": self.smem.to_json(), "args": [a.to_json() for a in self.args],
               "loc": _loc(self.loc)}
        if self.prepare:
            out["prepare"] = True
        return out


@dataclass(frozen=True, slots=True)
class Sync:
    """A host synchronisation. `observed` says why it orders something the host observes
    before the next GPU operation (the host reads memory an asynchronous copy fills, or changes
    memory one reads, and where); empty: an idle sync, which fusion may cross."""

    what: str  # device | stream | event
    loc: Location | None = None
    observed: str = ""

    def to_json(self) -> dict:
        out = {"op": "sync", "what": self.what, "loc": _loc(self.loc)}
        if self.observed:
            out["observed"] = self.observed
        return out


@dataclass(frozen=True, slots=True)
class Loop:
    """`for var = lo; var < hi (step > 0) or var > hi (step < 0); var += step`.

    An opaque loop (trip count unknown to the analysis, e.g. `do { } while (flag)`) has
    hi = None, lo = 0, step = 1 and a synthetic variable name starting with `_`."""

    var: str
    lo: Expr
    hi: Expr | None
    step: int
    body: tuple[Op, ...]
    loc: Location | None = None

    @property
    def opaque(self) -> bool:
        return self.hi is None

    def to_json(self) -> dict:
        return {"op": "loop", "var": self.var, "lo": self.lo.to_json(),
                "hi": None if self.hi is None else self.hi.to_json(), "step": self.step,
                "body": [op.to_json() for op in self.body], "loc": _loc(self.loc)}


Op = Alloc | Free | Copy | Memset | Launch | Sync | Loop


def flat_ops(ops: tuple[Op, ...]) -> Iterator[Op]:
    """Every op that is not a loop, loop bodies included, in program order."""
    for op in ops:
        if isinstance(op, Loop):
            yield from flat_ops(op.body)
        else:
            yield op


def launch_count(ops: Sequence[Op], trips_opaque: int = 1) -> int:
    """Dynamic number of launches (constant loop bounds; an opaque loop counts `trips_opaque`)."""
    total = 0
    for op in ops:
        if isinstance(op, Launch):
            total += 1
        elif isinstance(op, Loop):
            inner = launch_count(op.body, trips_opaque)
            if op.hi is None or not (op.lo.is_const and op.hi.is_const):
                total += inner * trips_opaque
            else:
                lo, hi, s = op.lo.const, op.hi.const, op.step
                trips = max(0, -(-(hi - lo) // s)) if s > 0 else max(0, -(-(lo - hi) // -s))
                total += inner * trips
    return total


def dev_refs(addr: object) -> list[DevRef]:
    """The device buffers an address may name: its own, or a rotating address's choices."""
    if isinstance(addr, Rotating):
        return [c for c in addr.choices if isinstance(c, DevRef)]
    return [addr] if isinstance(addr, DevRef) else []


@dataclass(frozen=True, slots=True)
class HostProgram:
    entry: str
    buffers: tuple[Buffer, ...]
    ops: tuple[Op, ...]
    argv: tuple[str, ...] | None = None  # the arguments the model is specialised to (--args)
    # the __device__/__constant__ variables symbol copies touch (their addresses: `@name`)
    symbols: tuple[Symbol, ...] = ()

    def symbol(self, name: str) -> Symbol | None:
        """The device variable `name` (`@coef`) names, or None for a buffer."""
        return next((s for s in self.symbols if s.name == name), None)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def data_bytes(self) -> int:
        """The device memory the program allocates, in bytes (every buffer)."""
        return sum(b.bytes for b in self.buffers)

    def launches(self) -> list[Launch]:
        out: list[Launch] = []

        def walk(ops: tuple[Op, ...]) -> None:
            for op in ops:
                if isinstance(op, Launch):
                    out.append(op)
                elif isinstance(op, Loop):
                    walk(op.body)

        walk(self.ops)
        return out

    def launches_by_kernel(self) -> dict[str, list[Launch]]:
        """Every static launch, grouped by the kernel's mangled name (program order)."""
        out: dict[str, list[Launch]] = {}
        for op in self.launches():
            out.setdefault(op.mangled, []).append(op)
        return out

    def to_json(self) -> dict:
        out = {
            "entry": self.entry,
            "buffers": [{"id": b.id, "name": b.name, "bytes": b.bytes, "role": b.role,
                         "loc": _loc(b.loc)} for b in self.buffers],
            "ops": [op.to_json() for op in self.ops],
        }
        if self.argv is not None:
            out["argv"] = list(self.argv)
        if self.symbols:
            out["symbols"] = [s.to_json() for s in self.symbols]
        return out
