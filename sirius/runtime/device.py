"""What the host-program interpreter needs from a device: memory, modules, launches.

`CpuDevice` (sirius/runtime/cpu/device.py) implements it on the host CPU; a pycuda device will
implement the same protocol on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sirius.diagnostics import Location, SiriusError


@dataclass(frozen=True, slots=True)
class LaunchStats:
    """What one launch did. Counts are exact and deterministic; `seconds` is wall time."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    instructions: int
    global_load_bytes: int
    global_store_bytes: int
    shared_load_bytes: int
    shared_store_bytes: int
    barriers: int
    seconds: float
    mode: str  # "fast" (threads one after another), "loops" (work-item loops between
    # barriers) or "fibers" (cooperative threads)
    waits: int = 0  # a `counters` megakernel: producer flags its blocks' waits look at
    # a megakernel: "grid" (grid barriers) or "counters", and per segment its instructions,
    # global load bytes and global store bytes (the totals above are their sums)
    sync: str = ""
    segments: tuple[tuple[int, int, int], ...] = ()
    # FLOPs per precision (f16, f32, f64) where the device counts them (the CPU executor with
    # count_flops: sirius/runtime/cpu/flops.py), else zeros; a megakernel's per segment too
    flops: tuple[int, int, int] = (0, 0, 0)
    segment_flops: tuple[tuple[int, int, int], ...] = ()
    # `sirius verify`'s launch replay: the counts are the first order's run of this launch,
    # whose result was written instead of running it (sirius/verify/replay.py); `seconds` the
    # replay's
    replayed: bool = False

    def to_json(self) -> dict:
        """Every field; the FLOPs only where they were counted, `replayed` only when true."""
        out = {k: getattr(self, k) for k in self.__slots__}
        if not any(self.flops):
            del out["flops"], out["segment_flops"]
        if not self.replayed:
            del out["replayed"]
        return out


@dataclass(frozen=True, slots=True)
class TraceChunk:
    """Every global and shared access of one launch: `records` is a structured array with
    fields block, thread (linear ids), addr, size, kind (0 load, 1 store, 2 atomic).

    Shared memory is one area per worker starting at each of `smem_bases`, `smem_bytes` long;
    `shared` names its static arrays with their offsets (declaration order), and the dynamic
    area starts at `smem_static`. `globals` are the module globals of every worker's copy of
    the module: (address, bytes, index into `global_names`, their IR names)."""

    records: np.ndarray
    smem_bases: tuple[int, ...]
    smem_bytes: int
    smem_static: int
    shared: tuple  # rewrite.SharedArray, in module order
    globals: tuple[tuple[int, int, int], ...] = ()
    global_names: tuple[str, ...] = ()


class KernelFault(SiriusError):
    """A kernel did something a GPU would not survive: an access outside every allocation, or a
    barrier that not every thread of the block reaches."""


@dataclass
class Module:
    """A loaded device module; `kernels` maps mangled names to source names."""

    handle: object
    kernels: dict[str, str] = field(default_factory=dict)


class Device(Protocol):
    name: str

    def alloc(self, nbytes: int, label: str = "") -> int: ...
    def free(self, address: int) -> None: ...
    def copy_to_device(self, address: int, data: np.ndarray) -> None: ...
    def copy_from_device(self, address: int, nbytes: int) -> np.ndarray: ...
    def copy_device(self, dst: int, src: int, nbytes: int) -> None: ...
    def memset(self, address: int, value: int, nbytes: int) -> None: ...
    # a module's __device__/__constant__ variable by IR name (cudaMemcpy{To,From}Symbol)
    def copy_to_symbol(self, module: Module, name: str, offset: int,
                       data: np.ndarray) -> None: ...
    def copy_from_symbol(self, module: Module, name: str, offset: int,
                         nbytes: int) -> np.ndarray: ...
    def load_module(self, program, data_bytes: int | None = None) -> Module: ...
    def launch(self, module: Module, kernel: str, grid: tuple[int, int, int],
               block: tuple[int, int, int], smem: int, args: list,
               loc: Location | None = None) -> LaunchStats: ...
    def synchronize(self) -> None: ...
    def timer(self) -> float: ...
