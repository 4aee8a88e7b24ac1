"""Device memory of the CPU executor: one private mapping per allocation, away from the heap.

Every allocation is its own anonymous mapping (never malloc's heap, so a kernel that writes out
of bounds cannot corrupt the allocator's bookkeeping and abort the process later):

    [ 64 KiB no access | 256 B red zone | data | 256 B red zone, slack | 64 KiB no access ]

The data starts 64-byte aligned. The red zones and the slack up to the page end hold 0xCD: a
load just past a buffer reads them, a store just past it lands there (the bounds checker reports
both; after an unchecked launch the runtime checks the red zones). An access further away hits a
no-access region and raises SIGSEGV, which the runtime turns into a reported fault. A mapping
lives as long as Python holds its `mmap` object (numpy views keep it alive), so freeing an
allocation never leaves a dangling view.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import mmap
from dataclasses import dataclass

import numpy as np

REDZONE = 256
GUARD = 64 << 10
FILL = 0xCD


@functools.cache
def _mprotect():
    libc = ctypes.CDLL(None, use_errno=True)
    f = libc.mprotect
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    f.restype = ctypes.c_int
    return f


@dataclass
class Allocation:
    raw: np.ndarray  # the whole mapping, no-access regions included: never touch it whole
    offset: int      # where the data starts in raw
    nbytes: int
    label: str
    redzone_dirty: bool = False  # a store into a red zone was already reported


@dataclass(frozen=True, slots=True)
class Region:
    """An address range a kernel may access: an allocation or a module global."""

    lo: int
    hi: int
    label: str


class DeviceMemory:
    def __init__(self) -> None:
        self.allocs: dict[int, Allocation] = {}  # data address -> allocation
        self.sorted: list[int] = []
        self.generation = 0  # bumped by every alloc and free (launch descriptors cache on it)

    def alloc(self, nbytes: int, label: str = "") -> int:
        page = mmap.PAGESIZE
        body = -(-(GUARD + REDZONE + nbytes + REDZONE) // page) * page
        mm = mmap.mmap(-1, body + GUARD, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(mm, dtype=np.uint8)
        start = raw.ctypes.data
        for lo in (start, start + body):
            if _mprotect()(lo, GUARD, 0) != 0:
                raise MemoryError(f"mprotect failed: {ctypes.get_errno()}")
        raw[GUARD:body] = FILL
        offset = GUARD + REDZONE
        base = start + offset
        self.allocs[base] = Allocation(raw, offset, nbytes, label)
        bisect.insort(self.sorted, base)
        self.generation += 1
        return base

    def free(self, address: int) -> None:
        if address not in self.allocs:
            raise ValueError(f"free of 0x{address:x}, which is not an allocation")
        del self.allocs[address]
        self.sorted.remove(address)
        self.generation += 1

    def locate(self, address: int) -> tuple[int, int]:
        """(allocation address, offset) of an address inside an allocation."""
        i = bisect.bisect_right(self.sorted, address) - 1
        if i < 0 or address > self.sorted[i] + self.allocs[self.sorted[i]].nbytes:
            raise ValueError(f"0x{address:x} is not inside any allocation")
        return self.sorted[i], address - self.sorted[i]

    def view(self, address: int, nbytes: int) -> np.ndarray:
        """A writable byte view of device memory (must lie inside one allocation)."""
        base, off = self.locate(address)
        a = self.allocs[base]
        if off + nbytes > a.nbytes:
            raise ValueError(f"{nbytes} bytes at offset {off} overrun {a.label or 'a buffer'} "
                             f"({a.nbytes} bytes)")
        start = a.offset + off
        return a.raw[start:start + nbytes]

    def regions(self) -> list[Region]:
        return [Region(b, b + self.allocs[b].nbytes, self.allocs[b].label or "an allocation")
                for b in self.sorted]


def nearest(regions: list[Region], addr: int, within: int = 1 << 20) -> str | None:
    """Where a bad address lies relative to the closest region (`regions` sorted by lo), if
    one is `within` bytes of it."""
    i = bisect.bisect_right([r.lo for r in regions], addr) - 1
    options = []
    if i >= 0:
        r = regions[i]
        if addr >= r.hi:
            options.append((addr - r.hi, f"{addr - r.hi} bytes past the end of {r.label} "
                                         f"({r.hi - r.lo} bytes)"))
        else:
            options.append((0, f"{addr - r.lo} bytes into {r.label} ({r.hi - r.lo} bytes)"))
    if i + 1 < len(regions):
        r = regions[i + 1]
        options.append((r.lo - addr, f"{r.lo - addr} bytes before the start of {r.label}"))
    best = min(options) if options else None
    return best[1] if best is not None and best[0] <= within else None
