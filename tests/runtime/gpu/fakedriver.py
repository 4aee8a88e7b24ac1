"""Fake drivers for the GPU runtime's tests (no pycuda, no GPU).

`FakeDriver` keeps device memory in numpy arrays at fake addresses, logs every call, runs
kernels given as Python functions, and keeps a virtual clock in microseconds: an eager launch
costs `launch_us` plus the kernel's cost, a graph launch `graph_us` plus its kernels' costs, so
bench timings have known values. Work issued on a stream that is being captured is kept in the
graph, not run, as CUDA does; a synchronous call during a capture is an error.

`CpuBackedDriver` runs the kernels on the CPU executor: its memory is a CpuDevice's, and a
launch unpacks the parameter buffer (by its own reading of the PTX parameter list) and launches
the IR kernel of the same name. A GpuDevice on it computes what the CPU executor computes, so
the interpreter, argument packing and module handling are checked by value.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

from sirius.runtime.gpu.driver import DeviceInfo, GpuError

INFO = DeviceInfo("Fake H100", (9, 0), 132, 1 << 20, 80 << 30, 227 * 1024, True, 13000)


@dataclass
class FakeModule:
    ptx: str
    cooperative: bool
    names: tuple[str, ...]
    cpu: object = None


@dataclass
class FakeFunction:
    name: str
    module: FakeModule
    static_smem: int = 0
    max_dynamic: int = 48 * 1024


@dataclass
class FakeEvent:
    t_us: float | None = None


@dataclass
class FakeStream:
    n: int


@dataclass
class FakeGraph:
    ops: list = field(default_factory=list)
    freed: bool = False


class FakeDriver:
    graph_api = "fake graphs"

    def __init__(self, kernels: dict | None = None, *, info: DeviceInfo = INFO,
                 costs: dict[str, float] | None = None, launch_us: float = 5.0,
                 graph_us: float = 3.0, max_active: int = 4, static_smem: int = 0,
                 free_bytes: int = 1 << 34, can_capture: bool = True,
                 capture_fails: str = ""):
        self.info = info
        self.kernels = kernels or {}
        self.costs = costs or {}
        self.launch_us, self.graph_us = launch_us, graph_us
        self.max_active = max_active
        self.static = static_smem
        self.free_bytes = free_bytes
        self.can_capture = can_capture
        self.capture_fails = capture_fails  # a kernel whose launch fails while captured
        self.mem: dict[int, np.ndarray] = {}
        self.next = 0x7F00_0000_0000
        self.calls: list[tuple] = []
        self.now_us = 0.0
        self.capturing: dict[int, FakeGraph] = {}
        self.streams = 0
        self.globals: dict[tuple[int, str], tuple[int, int]] = {}  # (module, name) -> var

    # memory --------------------------------------------------------------------------------
    def view(self, address: int, nbytes: int) -> np.ndarray:
        for base, arr in self.mem.items():
            if base <= address and address + nbytes <= base + arr.size:
                return arr[address - base:address - base + nbytes]
        raise GpuError(f"fake: 0x{address:x}+{nbytes} is outside every allocation")

    def mem_alloc(self, nbytes: int) -> int:
        base = self.next
        self.next += (max(1, nbytes) + 255) // 256 * 256 + 256
        self.mem[base] = np.zeros(nbytes, dtype=np.uint8)
        self.calls.append(("alloc", base, nbytes))
        return base

    def mem_free(self, address: int) -> None:
        if address not in self.mem:
            raise GpuError(f"fake: double free of 0x{address:x}")
        del self.mem[address]
        self.calls.append(("free", address))

    def mem_free_bytes(self) -> int:
        return self.free_bytes

    def _sync_call(self, what: str) -> None:
        if self.capturing:
            raise GpuError(f"fake: {what} while a stream is captured")

    def htod(self, address: int, data: np.ndarray) -> None:
        self._sync_call("cuMemcpyHtoD")
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self.view(address, b.size)[:] = b
        self.calls.append(("htod", address, b.size))

    def dtoh(self, address: int, nbytes: int) -> np.ndarray:
        self._sync_call("cuMemcpyDtoH")
        self.calls.append(("dtoh", address, nbytes))
        return self.view(address, nbytes).copy()

    def _issue(self, stream, op: tuple) -> None:
        """Run `op` now, or keep it in the graph being captured on `stream`."""
        self.calls.append(op + (None if stream is None else stream.n,))
        if stream is not None and stream.n in self.capturing:
            if op[0] == "launch" and op[1].name == self.capture_fails:
                raise GpuError(f"fake: {op[1].name} cannot be launched while a stream is captured")
            self.capturing[stream.n].ops.append(op)
        else:
            self._run(op, eager=True)

    def _run(self, op: tuple, eager: bool) -> None:
        kind = op[0]
        if kind == "dtod":
            _, dst, src, n = op
            self.view(dst, n)[:] = self.view(src, n).copy()
        elif kind == "memset":
            _, a, v, n = op
            self.view(a, n)[:] = v & 0xFF
        else:
            _, fn, grid, block, smem, params = op[:6]
            impl = self.kernels.get(fn.name)
            if impl is not None:
                impl(self, grid, block, smem, params)
            self.now_us += self.costs.get(fn.name, 1.0) + (self.launch_us if eager else 0.0)

    def dtod(self, dst: int, src: int, nbytes: int, stream=None) -> None:
        self._issue(stream, ("dtod", dst, src, nbytes))

    def memset_d8(self, address: int, value: int, nbytes: int, stream=None) -> None:
        self._issue(stream, ("memset", address, value, nbytes))

    # modules and launches ---------------------------------------------------------------------
    def module_load(self, ptx: str, cooperative: bool = False) -> FakeModule:
        names = tuple(re.findall(r"\.entry\s+([\w$.]+)", ptx))
        self.calls.append(("module_load", names, cooperative))
        return FakeModule(ptx, cooperative, names)

    def global_address(self, module: FakeModule, name: str) -> tuple[int, int]:
        """A `.global` / `.const` variable of the PTX (`.b8 name[bytes]`), allocated in fake
        memory on first use, once per module (as cuModuleGetGlobal's address is)."""
        key = (id(module), name)
        if key not in self.globals:
            m = re.search(rf"\.(?:global|const)\s.*?\.b8\s+{re.escape(name)}\[(\d+)\]", module.ptx)
            if m is None:
                raise GpuError(f"fake: no global {name} in the module")
            self.globals[key] = (self.mem_alloc(int(m.group(1))), int(m.group(1)))
        return self.globals[key]

    def function(self, module: FakeModule, name: str) -> FakeFunction:
        if name not in module.names:
            raise GpuError(f"fake: no kernel {name} in the module")
        return FakeFunction(name, module, self.static, 48 * 1024 - self.static)

    def set_max_dynamic_smem(self, fn: FakeFunction, nbytes: int) -> None:
        fn.max_dynamic = nbytes
        self.calls.append(("set_max_dynamic_smem", fn.name, nbytes))

    def static_smem(self, fn: FakeFunction) -> int:
        return fn.static_smem

    def max_active_blocks(self, fn: FakeFunction, block_threads: int, smem: int) -> int:
        return self.max_active

    def _check_smem(self, fn: FakeFunction, smem: int) -> None:
        if smem > fn.max_dynamic:
            raise GpuError(f"fake: {fn.name} launched with {smem} bytes of dynamic shared "
                           "memory without opting in (CUDA_ERROR_INVALID_VALUE)")

    def launch(self, fn: FakeFunction, grid, block, smem: int, params: bytes,
               stream=None) -> None:
        self._check_smem(fn, smem)
        self._issue(stream, ("launch", fn, tuple(grid), tuple(block), smem, bytes(params)))

    def launch_cooperative(self, fn: FakeFunction, grid, block, smem: int, params: bytes,
                           offsets: tuple[int, ...], stream=None) -> None:
        if not fn.module.cooperative:
            raise GpuError(f"fake: {fn.name} was not loaded for cooperative launches")
        self._check_smem(fn, smem)
        self._issue(stream, ("launch_cooperative", fn, tuple(grid), tuple(block), smem,
                             bytes(params), tuple(offsets)))

    # ordering, time and graphs ------------------------------------------------------------------
    def synchronize(self) -> None:
        self._sync_call("cuCtxSynchronize")
        self.calls.append(("synchronize",))

    def stream(self) -> FakeStream:
        self.streams += 1
        return FakeStream(self.streams)

    def stream_synchronize(self, stream: FakeStream) -> None:
        if stream.n in self.capturing:
            raise GpuError("fake: cuStreamSynchronize on a capturing stream")
        self.calls.append(("stream_synchronize", stream.n))

    def event(self) -> FakeEvent:
        return FakeEvent()

    def record(self, event: FakeEvent, stream=None) -> None:
        event.t_us = self.now_us
        self.calls.append(("record", id(event), None if stream is None else stream.n))

    def elapsed_ms(self, start: FakeEvent, end: FakeEvent) -> float:
        return (end.t_us - start.t_us) / 1e3

    def begin_capture(self, stream: FakeStream) -> None:
        if not self.can_capture:
            raise GpuError("fake: stream capture is not supported here")
        self.capturing[stream.n] = FakeGraph()
        self.calls.append(("begin_capture", stream.n))

    def end_capture(self, stream: FakeStream) -> FakeGraph:
        self.calls.append(("end_capture", stream.n))
        if stream.n not in self.capturing:
            raise GpuError("fake: cuStreamEndCapture on a stream that is not capturing")
        return self.capturing.pop(stream.n)

    def graph_launch(self, graph: FakeGraph, stream: FakeStream) -> None:
        assert not graph.freed
        self.calls.append(("graph_launch", id(graph), stream.n))
        self.now_us += self.graph_us
        for op in graph.ops:
            self._run(op, eager=False)

    def graph_free(self, graph: FakeGraph) -> None:
        graph.freed = True
        self.calls.append(("graph_free", id(graph)))


# a fake whose kernels run on the CPU executor ---------------------------------------------
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([usbf])(8|16|32|64)")


def unpack(ptx: str, name: str, params: bytes) -> list:
    """The argument values in a parameter buffer, read with this test's own layout rules."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(([^)]*)\)", ptx)
    assert m is not None, name
    out, off = [], 0
    for text in filter(None, (t.strip() for t in m.group(1).split(","))):
        kind, bits = _PARAM.search(text).groups()
        size = int(bits) // 8
        off += -off % size
        raw = params[off:off + size]
        if kind == "f":
            out.append(struct.unpack({4: "<f", 8: "<d", 2: "<e"}[size], raw)[0])
        else:
            out.append(int.from_bytes(raw, "little", signed=kind == "s"))
        off += size
    assert off == len(params), (name, off, len(params))
    return out


class CpuBackedDriver(FakeDriver):
    def __init__(self, programs: list, **kw):
        from sirius.runtime.cpu.device import CpuDevice

        super().__init__(**kw)
        self.cpu = CpuDevice(progress=False)
        self.programs = programs  # IR programs whose kernels the PTX modules name

    def view(self, address: int, nbytes: int) -> np.ndarray:
        return self.cpu.view(address, nbytes)

    def mem_alloc(self, nbytes: int) -> int:
        base = self.cpu.alloc(nbytes)
        self.calls.append(("alloc", base, nbytes))
        return base

    def mem_free(self, address: int) -> None:
        self.cpu.free(address)
        self.calls.append(("free", address))

    def module_load(self, ptx: str, cooperative: bool = False) -> FakeModule:
        mod = super().module_load(ptx, cooperative)
        for p in self.programs:
            m = self.cpu.load_module(p)
            if set(m.kernels) == set(mod.names):
                mod.cpu = m
                return mod
        raise GpuError(f"fake: no IR program has exactly the kernels {mod.names}")

    def _run(self, op: tuple, eager: bool) -> None:
        if op[0] not in ("launch", "launch_cooperative"):
            return super()._run(op, eager)
        _, fn, grid, block, smem, params = op[:6]
        args = unpack(fn.module.ptx, fn.name, params)
        self.cpu.launch(fn.module.cpu, fn.name, grid, block, smem, args)
        self.now_us += self.costs.get(fn.name, 1.0) + (self.launch_us if eager else 0.0)
