"""The driver seam: every CUDA call that `GpuDevice` and the bench make goes through one object
of this protocol. `pycuda_driver.load_driver()` returns the real one (pycuda), imported only
when a GPU is asked for; tests pass a fake that records calls and keeps memory in numpy.

Handles (modules, functions, streams, events, graphs) are opaque to the callers: whatever the
driver returns, the caller gives back. Addresses are plain ints. `stream=None` is the default
stream, on which every call is synchronous with the host as CUDA's legacy stream is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sirius.diagnostics import SiriusError

INSTALL_HINT = ("install the GPU extra with `make setup-gpu` (or `pip install 'sirius[gpu]'` "
                "with the CUDA toolkit on PATH; docs/gpu.md)")


class GpuError(SiriusError):
    """A CUDA call failed: the driver's message, with what sirius was doing."""


class GpuUnavailable(GpuError):
    """No GPU can be used here: pycuda is not installed, or no CUDA driver or device."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    l2_bytes: int
    total_memory: int
    max_smem_per_block_optin: int  # dynamic + static shared memory a kernel may opt into
    cooperative_launch: bool
    driver_version: int  # e.g. 13000 for CUDA 13.0

    @property
    def arch(self) -> str:
        """The device's own architecture, `sm_90` for compute capability 9.0."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def to_json(self) -> dict:
        return {"name": self.name, "arch": self.arch,
                "compute_capability": list(self.compute_capability),
                "multiprocessors": self.multiprocessors, "l2_bytes": self.l2_bytes,
                "total_memory": self.total_memory,
                "max_smem_per_block_optin": self.max_smem_per_block_optin,
                "cooperative_launch": self.cooperative_launch,
                "driver_version": self.driver_version}


class Driver(Protocol):
    """What sirius needs from CUDA. Every method raises `GpuError` on a failed call."""

    info: DeviceInfo
    graph_api: str  # who captures graphs, said in bench results ("" when it cannot)

    # memory
    def mem_alloc(self, nbytes: int) -> int: ...
    def mem_free(self, address: int) -> None: ...
    def mem_free_bytes(self) -> int: ...
    def htod(self, address: int, data: np.ndarray) -> None: ...
    def dtoh(self, address: int, nbytes: int) -> np.ndarray: ...
    def dtod(self, dst: int, src: int, nbytes: int, stream: object = None) -> None: ...
    def memset_d8(self, address: int, value: int, nbytes: int, stream: object = None) -> None: ...

    # modules and launches
    def module_load(self, ptx: str, cooperative: bool = False) -> object: ...
    def function(self, module: object, name: str) -> object: ...
    def global_address(self, module: object, name: str) -> tuple[int, int]: ...  # (addr, bytes)
    def set_max_dynamic_smem(self, fn: object, nbytes: int) -> None: ...
    def static_smem(self, fn: object) -> int: ...
    def max_active_blocks(self, fn: object, block_threads: int, smem: int) -> int: ...
    def launch(self, fn: object, grid: tuple[int, int, int], block: tuple[int, int, int],
               smem: int, params: bytes, stream: object = None) -> None: ...
    def launch_cooperative(self, fn: object, grid: tuple[int, int, int],
                           block: tuple[int, int, int], smem: int, params: bytes,
                           offsets: tuple[int, ...], stream: object = None) -> None: ...

    # ordering and time
    def synchronize(self) -> None: ...
    def stream(self) -> object: ...
    def stream_synchronize(self, stream: object) -> None: ...
    def event(self) -> object: ...
    def record(self, event: object, stream: object = None) -> None: ...
    def elapsed_ms(self, start: object, end: object) -> float: ...

    # CUDA graphs (stream capture)
    def begin_capture(self, stream: object) -> None: ...
    def end_capture(self, stream: object) -> object: ...
    def graph_launch(self, graph: object, stream: object) -> None: ...
    def graph_free(self, graph: object) -> None: ...
