"""`GpuDevice`: the Device protocol (sirius/runtime/device.py) on a real GPU, through the driver
seam (driver.py; pycuda by default). The host-program interpreter runs any HostProgram on it
unchanged: allocations, copies, memsets and launches go to the GPU in program order on the
default stream, so every copy sees the launches before it, as on the CPU executor.

Modules. `load_module(program)` takes the PTX of `program.ptx` when it has one (a carried
directory, `PtxProgram`), else emits PTX from `program.device_ir` with the backend for the
device's architecture (compute capability 9.0 -> sm_90; a device newer than the backend knows
gets the newest PTX it knows, which the driver compiles for it). Kernels named in
`program.cooperative_kernels` are launched with `cuLaunchCooperativeKernel` (the `grid`
megakernel variant), after checking that the grid fits the co-resident block count.

Launches. Arguments are packed by the kernel's PTX parameter list (ptx.py). With
`time_launches` (the default) every launch is timed with CUDA events and waited for, so
`LaunchStats.seconds` is the kernel's own time and a kernel fault is reported at its launch.

Gaps against the CPU executor, on purpose: no instruction, byte or barrier counters (they are 0
and `LaunchStats.mode` is "gpu"), no access traces (`trace` is False), no block orders, no
bounds checks, and no `view` of device memory (copy it back with `copy_from_device`).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sirius.diagnostics import Location
from sirius.runtime.device import KernelFault, LaunchStats, Module
from sirius.runtime.gpu import ptx as ptxinfo
from sirius.runtime.gpu.driver import DeviceInfo, Driver, GpuError
from sirius.runtime.gpu.pycuda_driver import load_driver

DEFAULT_DYNAMIC_SMEM = 48 * 1024  # what a kernel may use without opting in


@dataclass(frozen=True)
class PtxProgram:
    """A device module as PTX (no IR): what a carried directory gives `load_module`."""

    ptx: str
    files: tuple = ()
    cooperative_kernels: tuple[str, ...] = ()


@dataclass
class GpuModule:
    ptx: str
    handle: object
    params: dict[str, tuple[ptxinfo.Param, ...]]
    cooperative: frozenset[str]
    functions: dict[str, object] = field(default_factory=dict)
    dynamic_smem: dict[str, int] = field(default_factory=dict)  # the opt-in set per kernel


@dataclass(frozen=True, slots=True)
class PreparedLaunch:
    """A launch ready to submit (to replay, or to capture into a CUDA graph)."""

    kernel: str  # the name shown to users
    fn: object
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    params: bytes
    offsets: tuple[int, ...]
    cooperative: bool


class GpuDevice:
    name = "gpu"
    trace = False  # the interpreter asks; a GPU run records no access traces

    def __init__(self, driver: Driver | None = None, *, ordinal: int = 0,
                 time_launches: bool = True):
        self.driver = driver if driver is not None else load_driver(ordinal)
        self.info: DeviceInfo = self.driver.info
        self.time_launches = time_launches
        self._allocs: dict[int, tuple[int, str]] = {}  # base -> (bytes, label)
        self._bases: list[int] = []

    # memory ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int, label: str = "") -> int:
        base = self.driver.mem_alloc(nbytes)
        self._allocs[base] = (nbytes, label)
        self._bases = sorted(self._allocs)
        return base

    def free(self, address: int) -> None:
        if address not in self._allocs:
            raise GpuError(f"free of 0x{address:x}, which is not an allocation")
        del self._allocs[address]
        self._bases = sorted(self._allocs)
        self.driver.mem_free(address)

    def locate(self, address: int) -> tuple[int, int]:
        """(allocation base, offset) of an address inside an allocation."""
        i = bisect_right(self._bases, address) - 1
        if i >= 0:
            base = self._bases[i]
            if address < base + max(1, self._allocs[base][0]):
                return base, address - base
        raise GpuError(f"address 0x{address:x} is in no allocation")

    def label(self, base: int) -> str:
        return self._allocs[base][1]

    def copy_to_device(self, address: int, data: np.ndarray) -> None:
        self.driver.htod(address, np.ascontiguousarray(data).view(np.uint8).reshape(-1))

    def copy_from_device(self, address: int, nbytes: int) -> np.ndarray:
        return self.driver.dtoh(address, nbytes)

    def copy_device(self, dst: int, src: int, nbytes: int) -> None:
        self.driver.dtod(dst, src, nbytes)

    def memset(self, address: int, value: int, nbytes: int) -> None:
        self.driver.memset_d8(address, value, nbytes)

    def symbol_address(self, module: Module, name: str, offset: int, nbytes: int) -> int:
        """The device address of byte `offset` of the module's variable `name` (IR name),
        checked against its size."""
        gm: GpuModule = module.handle
        base, size = self.driver.global_address(gm.handle, name)
        if offset < 0 or nbytes < 0 or offset + nbytes > size:
            raise GpuError(f"a copy of {nbytes} bytes at offset {offset} of the device variable "
                           f"'{name}' is out of bounds: it has {size} bytes")
        return base + offset

    def copy_to_symbol(self, module: Module, name: str, offset: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self.driver.htod(self.symbol_address(module, name, offset, b.size), b)

    def copy_from_symbol(self, module: Module, name: str, offset: int,
                         nbytes: int) -> np.ndarray:
        return self.driver.dtoh(self.symbol_address(module, name, offset, nbytes), nbytes)

    def synchronize(self) -> None:
        self.driver.synchronize()

    def timer(self) -> float:
        """Host seconds after the GPU finished everything issued (a host-side clock)."""
        self.driver.synchronize()
        return time.perf_counter()

    def time_region(self, issue: Callable[[], None], stream: object = None) -> float:
        """Seconds between CUDA events recorded before and after what `issue` enqueues."""
        start, end = self.driver.event(), self.driver.event()
        self.driver.record(start, stream)
        issue()
        self.driver.record(end, stream)
        return self.driver.elapsed_ms(start, end) / 1e3

    # modules --------------------------------------------------------------------------------
    def load_module(self, program, data_bytes: int | None = None) -> Module:
        # data_bytes: the CPU executor's compile-level hint; the driver's JIT has none
        text = getattr(program, "ptx", None) or self._emit(program)
        own = self.info.compute_capability[0] * 10 + self.info.compute_capability[1]
        arch = ptxinfo.target(text)
        if arch is not None and ptxinfo.sm_number(arch) > own:
            raise GpuError(f"the PTX targets {arch}, newer than this GPU ({self.info.name}, "
                           f"{self.info.arch}); prepare it with --arch {self.info.arch}")
        have, can = ptxinfo.ptx_version(text), ptxinfo.driver_ptx(self.info.driver_version)
        if have is not None and can is not None and have > can:
            v = self.info.driver_version
            raise GpuError(f"the PTX is ISA version {have / 10:.1f}; this driver (CUDA "
                           f"{v // 1000}.{v % 1000 // 10}) loads up to {can / 10:.1f}: update "
                           f"the driver, or prepare the PTX with --ptx-version {can}")
        coop = frozenset(getattr(program, "cooperative_kernels", ()) or ())
        params = ptxinfo.entries(text)
        missing = sorted(coop - set(params))
        if missing:
            raise GpuError(f"cooperative kernels {', '.join(missing)} are not in the PTX")
        handle = self.driver.module_load(text, cooperative=bool(coop))
        return Module(GpuModule(text, handle, params, coop), {k: k for k in params})

    def _emit(self, program) -> str:
        """PTX for the device from `program.device_ir` (needs the backend: llvmlite)."""
        from sirius.backend.ptx import MIN_PTX, emit_ptx, ptx_version_for

        arch = ptxinfo.compile_arch(self.info.compute_capability, tuple(MIN_PTX))
        version = ptx_version_for(program.device_ir, arch)
        can = ptxinfo.driver_ptx(self.info.driver_version)
        if can is not None:
            version = max(MIN_PTX[arch], min(version, can))
        return emit_ptx(program.device_ir, arch, ptx_version=version).text

    # launches -------------------------------------------------------------------------------
    def prepare(self, module: Module, kernel: str, grid, block, smem: int, args: list,
                loc: Location | None = None, name: str | None = None,
                cooperative: bool | None = None) -> PreparedLaunch:
        """Check a launch against the module and the device, and pack its arguments."""
        gm: GpuModule = module.handle
        shown = name or kernel
        if kernel not in gm.params:
            raise KernelFault(f"kernel {shown} is not in the loaded module", loc)
        grid, block = tuple(int(g) for g in grid), tuple(int(b) for b in block)
        threads = block[0] * block[1] * block[2]
        if threads > 1024 or threads <= 0 or min(grid) <= 0 or grid[0] >= 1 << 31 \
                or max(grid[1], grid[2]) > 65535 or block[2] > 64:
            raise KernelFault(f"kernel {shown}: invalid launch configuration grid {grid} "
                              f"block {block}", loc)
        fn = gm.functions.get(kernel)
        if fn is None:
            fn = gm.functions[kernel] = self.driver.function(gm.handle, kernel)
        self._dynamic_smem(gm, kernel, fn, smem, shown, loc)
        try:
            params, offsets = ptxinfo.pack(gm.params[kernel], list(args), shown)
        except GpuError as e:
            raise KernelFault(e.message, loc) from e
        coop = kernel in gm.cooperative if cooperative is None else cooperative
        if coop:
            self._check_cooperative(fn, grid, threads, smem, shown, loc)
        return PreparedLaunch(shown, fn, grid, block, smem, params, offsets, coop)

    def _dynamic_smem(self, gm: GpuModule, kernel: str, fn, smem: int, shown: str,
                      loc: Location | None) -> None:
        static = self.driver.static_smem(fn)
        if static + smem > self.info.max_smem_per_block_optin:
            raise KernelFault(f"kernel {shown} asks for {smem} bytes of dynamic shared memory "
                              f"besides {static} static; {self.info.name} allows "
                              f"{self.info.max_smem_per_block_optin} per block", loc)
        if static + smem > DEFAULT_DYNAMIC_SMEM and gm.dynamic_smem.get(kernel, -1) < smem:
            self.driver.set_max_dynamic_smem(fn, smem)
            gm.dynamic_smem[kernel] = smem

    def _check_cooperative(self, fn, grid, threads: int, smem: int, shown: str,
                           loc: Location | None) -> None:
        if not self.info.cooperative_launch:
            raise KernelFault(f"kernel {shown} needs a cooperative launch, which "
                              f"{self.info.name} does not support", loc)
        per_sm = self.driver.max_active_blocks(fn, threads, smem)
        resident = per_sm * self.info.multiprocessors
        blocks = grid[0] * grid[1] * grid[2]
        if blocks > resident:
            raise KernelFault(f"kernel {shown}: a cooperative grid of {blocks} blocks exceeds "
                              f"the {resident} that can be resident at once on "
                              f"{self.info.name} ({per_sm} per multiprocessor x "
                              f"{self.info.multiprocessors})", loc)

    def submit(self, p: PreparedLaunch, stream: object = None) -> None:
        if p.cooperative:
            self.driver.launch_cooperative(p.fn, p.grid, p.block, p.smem, p.params, p.offsets,
                                           stream)
        else:
            self.driver.launch(p.fn, p.grid, p.block, p.smem, p.params, stream)

    def launch(self, module: Module, kernel: str, grid, block, smem: int, args: list,
               loc: Location | None = None, name: str | None = None,
               cooperative: bool | None = None) -> LaunchStats:
        p = self.prepare(module, kernel, grid, block, smem, args, loc, name, cooperative)
        try:
            if self.time_launches:
                seconds = self.time_region(lambda: self.submit(p))
            else:
                t0 = time.perf_counter()
                self.submit(p)
                seconds = time.perf_counter() - t0
        except GpuError as e:  # a fault shows at the first wait after the launch
            raise KernelFault(f"kernel {p.kernel}: {e.message}", loc, e.notes) from e
        return LaunchStats(p.kernel, p.grid, p.block, smem, 0, 0, 0, 0, 0, 0, seconds, "gpu")
