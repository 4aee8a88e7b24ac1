"""Device addresses in host memory: where the host keeps them and what a copy sends.

A host-to-device copy can send device addresses (a table of pointers the host filled, a struct
holding a device pointer); the host model records them on the copy (`Copy.pointers`) so that the
executor writes the run's real addresses there and the points-to analysis knows the table's
targets. This mixin of the host interpreter judges, for a value about to be stored, whether it
may be (the bits of) a device address, and which device buffers' copied-back bytes it may carry
(`provenance`). A store the model cannot place (an index that depends on a loop, code sirius
skips) taints the memory it writes (`Memory.taint`): a copy of it to the device is refused. A
host loop that does no GPU work but writes device addresses (`for (j...) htab[j] = bufs[j]`) is
run iteration by iteration instead of being skipped (`HostFlow.run_concretely`), up to
MAX_CONCRETE_TRIPS iterations, when every branch in it can be decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sirius.analysis.expr import Expr
from sirius.analysis.host import libcalls
from sirius.analysis.host.model import Address
from sirius.analysis.host.values import AV, DevPtr, HostPtr, Memory, Unknown
from sirius.analysis.irview import Instr, Value

if TYPE_CHECKING:
    from sirius.analysis.host.flow import Frame

MAX_CONCRETE_TRIPS = 4096
# Instructions whose result carries the bits of their operands (a pointer made into an integer
# and back, moved, offset, selected).
_CARRY = {"getelementptr", "bitcast", "addrspacecast", "ptrtoint", "inttoptr", "zext", "sext",
          "trunc", "freeze", "add", "sub", "or", "and", "xor", "shl", "lshr", "ashr", "phi",
          "select", "extractvalue", "insertvalue", "extractelement", "insertelement",
          "shufflevector"}
Provenance = tuple[bool, frozenset[str]]


class NotConcrete(Exception):
    """A loop run iteration by iteration met something it cannot decide."""


def join(items) -> Provenance:
    device, via = False, frozenset()
    for d, v in items:
        device, via = device or d, via | v
    return device, via


class AddressFlow:
    """Mixed into HostFlow (flow.py); uses its `mem`, `val`, `pointer_regions`."""

    concrete = 0  # > 0 while a loop runs iteration by iteration

    def skipped_writes(self, frame: Frame, blocks: set) -> list[tuple[Value, Provenance, Instr]]:
        """What code about to be skipped may write (the pointer written through) and what the
        written bytes may be."""
        out: list[tuple[Value, Provenance, Instr]] = []
        for b in blocks:
            for ins in b.instrs:
                if ins.opcode == "store":
                    out.append((ins.operands[1], self.provenance(frame, ins.operands[0], blocks),
                                ins))
                elif ins.opcode in ("call", "invoke"):
                    callee = ins.callee
                    name = callee.name if callee is not None else ""
                    if name.startswith(libcalls.IGNORED_INTRINSICS) or libcalls.is_readonly(name):
                        continue
                    ptrs = [a for a in ins.args if a.type.startswith("ptr")]
                    # what the callee may copy: what its pointers point to (a pointer it is
                    # given, unless a known device address, is not taken for one)
                    carried = join([self.provenance(frame, a, blocks, through=True)
                                    for a in ptrs] + [(True, frozenset()) for a in ptrs
                                                      if isinstance(frame.env.get(a), DevPtr)])
                    out += [(a, carried, ins) for a in ptrs]
        return out

    def provenance(self, frame: Frame, v: Value, blocks=frozenset(), depth: int = 0,
                   through: bool = False) -> Provenance:
        """Whether the value `v` may be a device address the host made (True, or the bits of
        one), and the device buffers whose copied-back bytes it may carry. `blocks`: code being
        skipped (its values are not known); `through`: the memory `v` points to, not `v`."""
        if depth > 12:
            return True, self._all_from_device()
        if through:
            regions = self.pointer_regions(frame, v, set())
            if regions is None:  # memory sirius cannot name (a FILE *, a library's buffer)
                return False, frozenset()
            return (any(self.mem.device_addresses(r) for r in regions),
                    frozenset().union(*(self.mem.from_device.get(r, frozenset())
                                         for r in regions)))
        if isinstance(v, Instr) and v.block in blocks:
            op = v.opcode
            if op == "load":
                return self.provenance(frame, v.operands[0], blocks, depth + 1, through=True)
            if op in _CARRY:
                ops = v.operands[1:] if op == "select" else v.operands
                return join(self.provenance(frame, o, blocks, depth + 1) for o in ops
                            if o.kind != "block")
            if op in ("alloca", "fcmp", "icmp") or op.startswith("f") or op.endswith("tofp"):
                return False, frozenset()
            if op in ("call", "invoke") and v.callee is not None and \
                    libcalls.is_allocator(v.callee.name):
                return False, frozenset()
            return v.type.startswith(("ptr", "i64")), frozenset()
        av = frame.env.get(v) if v in frame.env else self.val(frame, v)
        if isinstance(av, DevPtr):
            return True, frozenset()
        if isinstance(av, Unknown):
            return v.type.startswith("ptr") or (isinstance(v, Instr) and
                                                v.opcode == "ptrtoint"), frozenset()
        return False, frozenset()

    def _all_from_device(self) -> frozenset[str]:
        return frozenset().union(*self.mem.from_device.values())


def sent_addresses(mem: Memory, src: AV, nbytes: Expr, fail
                   ) -> tuple[tuple[tuple[int, Address], ...], tuple[str, ...]]:
    """The device addresses the host wrote into the bytes a host-to-device copy sends (byte
    offset in the copy, address), and the device buffers whose copied-back bytes they are.
    Device addresses sirius cannot place are refused: the copy would send garbage."""
    if not isinstance(src, HostPtr):
        tainted = next(iter(mem.tainted.values()), None)
        if tainted is not None:
            raise fail(
                "this copy sends host memory sirius cannot follow, and the program writes "
                f"device addresses into host memory ({tainted.reason}"
                f"{_at(tainted)}); sirius cannot tell whether they are sent",
                "copy from a host array named directly in the call")
        return (), ()
    region = src.region
    if region in mem.tainted:
        why = mem.tainted[region]
        raise fail(
            f"'{region.name}' holds device addresses sirius cannot place ({why.reason}"
            f"{_at(why)}); the device would receive them as garbage",
            "store device pointers into host arrays at constant indices, outside loops, "
            "or pass the buffers to the kernels as arguments")
    cells = mem.cells.get(region, {})
    held = [(off, size, v.addr) for off, (size, v) in sorted(cells.items())
            if isinstance(v, DevPtr)]
    via = tuple(sorted(mem.from_device.get(region, frozenset())))
    if not held:
        return (), via
    if not src.offset.is_const:
        raise fail(f"this copy sends '{region.name}', which holds device addresses, from an "
                   "offset that depends on loop variables; sirius cannot place the addresses")
    start = src.offset.const
    top = nbytes.const if nbytes.is_const else None
    out = []
    for off, size, addr in held:
        rel = off - start
        if rel + size <= 0 or (top is not None and rel >= top):
            continue
        if size != 8 or rel < 0:
            raise fail(f"'{region.name}' holds a device address in {size} bytes at byte "
                       f"{off}, which this copy cuts; sirius only places whole 8-byte addresses")
        out.append((rel, addr))
    return tuple(out), via


def _at(u: Unknown) -> str:
    return f", line {u.loc.line}" if u.loc is not None else ""
