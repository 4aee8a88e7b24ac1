"""The real driver: pycuda (the `[gpu]` extra), with cuda-python's driver bindings for the two
things pycuda 2026.1 cannot do.

- pycuda has no stream capture (no CUDA graphs) and no `cuLaunchCooperativeKernel`, and its
  `Function` does not expose the `CUfunction` handle. CUDA graphs are therefore captured with
  `cuda.bindings.driver` (`cuStreamBeginCapture` / `cuStreamEndCapture` / `cuGraphInstantiate`
  / `cuGraphLaunch`) on a pycuda stream, whose `handle` is the `CUstream`; the launches captured
  are pycuda's. A module with cooperative kernels is loaded through cuda-python
  (`cuModuleLoadData`) and all of its kernels launch through it (`cuLaunchKernel`,
  `cuLaunchCooperativeKernel`), so that the module's `__device__` globals exist once.
- Both libraries use the device's primary context, made current on the thread that creates the
  driver; a process makes one driver per device (`driver.load_driver` keeps them).
"""

from __future__ import annotations

import atexit
import ctypes
import warnings
from dataclasses import dataclass

import numpy as np

from sirius.runtime.gpu.driver import INSTALL_HINT, DeviceInfo, Driver, GpuError, GpuUnavailable

_DRIVERS: dict[int, Driver] = {}


def load_driver(ordinal: int = 0) -> Driver:
    """The pycuda driver on device `ordinal` (one per process and device); `GpuUnavailable`
    saying what is missing."""
    if ordinal not in _DRIVERS:
        _DRIVERS[ordinal] = PycudaDriver(ordinal)
    return _DRIVERS[ordinal]


def unavailable_reason(ordinal: int = 0) -> str | None:
    """None when a GPU can be used here, else why not (one line): for skip reasons."""
    try:
        load_driver(ordinal)
    except GpuUnavailable as e:
        return e.message
    return None


def _import_pycuda():
    try:
        with warnings.catch_warnings():  # pycuda's own guess at a failed import; ours follows
            warnings.simplefilter("ignore")
            import pycuda.driver as cuda
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] == "pycuda":
            raise GpuUnavailable(f"pycuda is not installed: {INSTALL_HINT}") from e
        raise GpuUnavailable(f"pycuda cannot be imported ({e}): {INSTALL_HINT}") from e
    except ImportError as e:  # pycuda's extension links libcuda.so.1, the driver's library
        text = str(e)
        if "libcuda" in text:
            raise GpuUnavailable("pycuda is installed, but the CUDA driver library "
                                 "(libcuda.so.1) is not on this machine: no NVIDIA driver, so "
                                 "no GPU to run on") from e
        if "undefined symbol: cu" in text:
            symbol = text.rsplit("undefined symbol:", 1)[1].strip()
            raise GpuUnavailable(f"pycuda is installed, but the CUDA driver library lacks "
                                 f"{symbol}: no NVIDIA driver here, or one older than the CUDA "
                                 "toolkit pycuda was built with") from e
        raise GpuUnavailable(f"pycuda cannot be imported ({text}); reinstall it: "
                             f"{INSTALL_HINT}") from e
    return cuda


def _cuda_python():
    """cuda-python's driver module (`cuda.bindings.driver`; `cuda.cuda` before 12.6)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        try:
            from cuda import cuda as cu  # type: ignore[no-redef]
        except ImportError as e:
            raise GpuError("CUDA graphs and cooperative launches need cuda-python's driver "
                           "bindings (pycuda has neither): pip install cuda-python, or "
                           "`make setup-gpu`") from e
    return cu


@dataclass
class _Module:
    ptx: str
    pycuda: object = None  # pycuda Module
    cu: object = None  # cuda-python CUmodule (a module with cooperative kernels)


@dataclass
class _Function:
    name: str
    pycuda: object = None  # pycuda Function
    cu: object = None  # cuda-python CUfunction


class PycudaDriver:
    graph_api = ("cuda-python (cuda.bindings.driver: cuStreamBeginCapture, cuStreamEndCapture, "
                 "cuGraphInstantiate, cuGraphLaunch) on a pycuda stream; pycuda has no stream "
                 "capture")

    def __init__(self, ordinal: int = 0):
        cuda = self.cuda = _import_pycuda()
        try:
            cuda.init()
            count = cuda.Device.count()
        except cuda.Error as e:
            raise GpuUnavailable(f"the CUDA driver did not start ({e}): no GPU, or its driver "
                                 "is not loaded") from e
        if ordinal >= count:
            raise GpuUnavailable(f"there is no CUDA device {ordinal} ({count} found)")
        dev = self.dev = cuda.Device(ordinal)
        self.ctx = dev.retain_primary_context()
        self.ctx.push()
        atexit.register(self._close)
        a = cuda.device_attribute
        major, minor = dev.compute_capability()
        self._cu = None
        coop = major >= 6
        try:
            cu = self.cu_driver()
            coop = bool(self._check(cu.cuDeviceGetAttribute(
                cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
                cu.CUdevice(ordinal)),
                "cuDeviceGetAttribute"))
        except GpuError:
            pass  # no cuda-python: graphs and cooperative launches will say so when asked
        self.info = DeviceInfo(
            dev.name(), (major, minor), dev.get_attribute(a.MULTIPROCESSOR_COUNT),
            dev.get_attribute(a.L2_CACHE_SIZE), dev.total_memory(),
            dev.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), coop,
            cuda.get_driver_version())
        self._allocs: dict[int, object] = {}

    def _close(self) -> None:
        for alloc in self._allocs.values():
            alloc.free()
        self._allocs.clear()
        try:
            self.ctx.pop()
        except self.cuda.Error:
            pass

    def _call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except self.cuda.Error as e:
            raise GpuError(f"{what} failed: {e}") from e

    # cuda-python --------------------------------------------------------------------------
    def cu_driver(self):
        if self._cu is None:
            cu = _cuda_python()
            try:
                self._check(cu.cuInit(0), "cuInit")
            except GpuError:
                raise
            except Exception as e:  # cuda.pathfinder: the driver library was not found
                raise GpuError(f"cuda-python cannot reach the CUDA driver: {e}") from e
            self._cu = cu
        return self._cu

    def _check(self, result, what: str):
        cu = self._cu or _cuda_python()
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != cu.CUresult.CUDA_SUCCESS:
            _, name = cu.cuGetErrorName(err)
            raise GpuError(f"{what} failed: {name.decode() if name else err}")
        return rest[0] if len(rest) == 1 else tuple(rest) or None

    def _cu_stream(self, stream):
        return self.cu_driver().CUstream(0 if stream is None else stream.handle)

    # memory -------------------------------------------------------------------------------
    def mem_alloc(self, nbytes: int) -> int:
        alloc = self._call(f"cuMemAlloc of {nbytes} bytes", self.cuda.mem_alloc, max(1, nbytes))
        self._allocs[int(alloc)] = alloc
        return int(alloc)

    def mem_free(self, address: int) -> None:
        self._allocs.pop(address).free()

    def mem_free_bytes(self) -> int:
        return self._call("cuMemGetInfo", self.cuda.mem_get_info)[0]

    def htod(self, address: int, data: np.ndarray) -> None:
        self._call("cuMemcpyHtoD", self.cuda.memcpy_htod, address,
                   np.ascontiguousarray(data).view(np.uint8))

    def dtoh(self, address: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            self._call("cuMemcpyDtoH", self.cuda.memcpy_dtoh, out, address)
        return out

    def dtod(self, dst: int, src: int, nbytes: int, stream: object = None) -> None:
        if stream is None:
            self._call("cuMemcpyDtoD", self.cuda.memcpy_dtod, dst, src, nbytes)
        else:
            self._call("cuMemcpyDtoDAsync", self.cuda.memcpy_dtod_async, dst, src, nbytes,
                       stream)

    def memset_d8(self, address: int, value: int, nbytes: int, stream: object = None) -> None:
        if stream is None:
            self._call("cuMemsetD8", self.cuda.memset_d8, address, value & 0xFF, nbytes)
        else:
            self._call("cuMemsetD8Async", self.cuda.memset_d8_async, address, value & 0xFF,
                       nbytes, stream)

    # modules and launches -------------------------------------------------------------------
    def module_load(self, ptx: str, cooperative: bool = False) -> _Module:
        image = ptx.encode() + b"\0"
        if cooperative:
            cu = self.cu_driver()
            return _Module(ptx, cu=self._check(cu.cuModuleLoadData(image), "cuModuleLoadData"))
        return _Module(ptx, pycuda=self._call("loading the PTX (cuModuleLoadDataEx)",
                                              self.cuda.module_from_buffer, image))

    def function(self, module: _Module, name: str) -> _Function:
        if module.cu is not None:
            cu = self.cu_driver()
            return _Function(name, cu=self._check(
                cu.cuModuleGetFunction(module.cu, name.encode()), f"cuModuleGetFunction {name}"))
        return _Function(name, pycuda=self._call(f"cuModuleGetFunction {name}",
                                                 module.pycuda.get_function, name))

    def global_address(self, module: _Module, name: str) -> tuple[int, int]:
        """(device address, bytes) of a module's global variable (cuModuleGetGlobal)."""
        if module.cu is not None:
            cu = self.cu_driver()
            ptr, size = self._check(cu.cuModuleGetGlobal(module.cu, name.encode()),
                                    f"cuModuleGetGlobal {name}")
            return int(ptr), int(size)
        ptr, size = self._call(f"cuModuleGetGlobal {name}", module.pycuda.get_global, name)
        return int(ptr), int(size)

    def set_max_dynamic_smem(self, fn: _Function, nbytes: int) -> None:
        if fn.cu is not None:
            cu = self.cu_driver()
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(cu.cuFuncSetAttribute(fn.cu, attr, nbytes), "cuFuncSetAttribute")
        else:
            attr = self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._call("cuFuncSetAttribute", fn.pycuda.set_attribute, attr, nbytes)

    def static_smem(self, fn: _Function) -> int:
        if fn.cu is not None:
            cu = self.cu_driver()
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
            return int(self._check(cu.cuFuncGetAttribute(attr, fn.cu), "cuFuncGetAttribute"))
        attr = self.cuda.function_attribute.SHARED_SIZE_BYTES
        return int(self._call("cuFuncGetAttribute", fn.pycuda.get_attribute, attr))

    def max_active_blocks(self, fn: _Function, block_threads: int, smem: int) -> int:
        cu = self.cu_driver()
        if fn.cu is None:
            raise GpuError(f"kernel {fn.name} was not loaded for cooperative launches")
        return int(self._check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            fn.cu, block_threads, smem), "cuOccupancyMaxActiveBlocksPerMultiprocessor"))

    def launch(self, fn: _Function, grid, block, smem: int, params: bytes,
               stream: object = None) -> None:
        if fn.pycuda is not None:
            self._call(f"launching {fn.name} (cuLaunchKernel)", fn.pycuda._launch_kernel,
                       tuple(grid), tuple(block), params, smem, stream)
            return
        self._cu_launch(fn, grid, block, smem, params, None, stream)

    def launch_cooperative(self, fn: _Function, grid, block, smem: int, params: bytes,
                           offsets: tuple[int, ...], stream: object = None) -> None:
        if fn.cu is None:
            raise GpuError(f"kernel {fn.name} was not loaded for cooperative launches")
        self._cu_launch(fn, grid, block, smem, params, offsets, stream)

    def _cu_launch(self, fn: _Function, grid, block, smem: int, params: bytes,
                   offsets: tuple[int, ...] | None, stream) -> None:
        """A launch through cuda-python: cooperative when `offsets` (of each parameter in
        `params`) are given, else the packed buffer through `extra`."""
        cu = self.cu_driver()
        s = self._cu_stream(stream)
        if offsets is None:
            size = ctypes.c_size_t(len(params))
            buf = ctypes.create_string_buffer(params, max(1, len(params)))
            extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
            self._check(cu.cuLaunchKernel(fn.cu, *grid, *block, smem, s, 0,
                                          ctypes.addressof(extra)), f"launching {fn.name}")
            return
        buf = ctypes.create_string_buffer(params, max(1, len(params)))
        ptrs = (ctypes.c_void_p * max(1, len(offsets)))(
            *[ctypes.addressof(buf) + o for o in offsets])
        self._check(cu.cuLaunchCooperativeKernel(fn.cu, *grid, *block, smem, s,
                                                 ctypes.addressof(ptrs)),
                    f"launching {fn.name} cooperatively (cuLaunchCooperativeKernel)")

    # ordering and time -------------------------------------------------------------------------
    def synchronize(self) -> None:
        self._call("cuCtxSynchronize", self.cuda.Context.synchronize)

    def stream(self):
        return self._call("cuStreamCreate", self.cuda.Stream)

    def stream_synchronize(self, stream) -> None:
        self._call("cuStreamSynchronize", stream.synchronize)

    def event(self):
        return self._call("cuEventCreate", self.cuda.Event)

    def record(self, event, stream: object = None) -> None:
        self._call("cuEventRecord", event.record, stream)

    def elapsed_ms(self, start, end) -> float:
        self._call("cuEventSynchronize", end.synchronize)
        return float(self._call("cuEventElapsedTime", end.time_since, start))

    # CUDA graphs ---------------------------------------------------------------------------------
    def begin_capture(self, stream) -> None:
        cu = self.cu_driver()
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._check(cu.cuStreamBeginCapture(self._cu_stream(stream), mode),
                    "cuStreamBeginCapture")

    def end_capture(self, stream) -> tuple:
        cu = self.cu_driver()
        graph = self._check(cu.cuStreamEndCapture(self._cu_stream(stream)), "cuStreamEndCapture")
        try:
            exe = self._check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        except TypeError:  # cuda-python 11: (graph, log buffer, size); use the flags form
            exe = self._check(cu.cuGraphInstantiateWithFlags(graph, 0), "cuGraphInstantiate")
        return graph, exe

    def graph_launch(self, graph: tuple, stream) -> None:
        cu = self.cu_driver()
        self._check(cu.cuGraphLaunch(graph[1], self._cu_stream(stream)), "cuGraphLaunch")

    def graph_free(self, graph: tuple) -> None:
        cu = self.cu_driver()
        self._check(cu.cuGraphExecDestroy(graph[1]), "cuGraphExecDestroy")
        self._check(cu.cuGraphDestroy(graph[0]), "cuGraphDestroy")

