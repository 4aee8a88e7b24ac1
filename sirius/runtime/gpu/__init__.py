"""The GPU half of the runtime: `GpuDevice` (the Device protocol on pycuda), the driver seam,
running host programs on a GPU, the benchmark (bench.py) and carried directories (carry.py).
docs/gpu.md says how to install and use it. pycuda is imported only when a device is made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from sirius.runtime.gpu.device import GpuDevice, PreparedLaunch, PtxProgram
from sirius.runtime.gpu.driver import DeviceInfo, Driver, GpuError, GpuUnavailable
from sirius.runtime.gpu.pycuda_driver import load_driver, unavailable_reason

__all__ = ["DeviceInfo", "Driver", "GpuDevice", "GpuError", "GpuUnavailable", "PreparedLaunch",
           "PtxProgram", "load_driver", "run_on_gpu", "run_program_gpu", "unavailable_reason"]

ORDER = "hardware"  # the block order of a GPU run: whatever the hardware does


def run_on_gpu(host_program, program, kernels, *, device: GpuDevice | None = None,
               seed: int = 0, inputs: dict[str, np.ndarray] | None = None,
               opaque_trips: int = 3, progress: Callable[[int, int], None] | None = None,
               dtypes: dict[str, np.dtype] | None = None):
    """Run a HostProgram on the GPU with the same seeded inputs as on the CPU executor;
    `program` is anything `GpuDevice.load_module` takes (IR or PTX)."""
    from sirius.runtime.interpreter import run_host_program

    return run_host_program(host_program, program, kernels, device or GpuDevice(), seed=seed,
                            inputs=inputs, opaque_trips=opaque_trips, progress=progress,
                            order=ORDER, dtypes=dtypes)


def run_program_gpu(files: Sequence[Path | str], *, entry: str = "main", arch: str = "sm_80",
                    flags: Sequence[str] = (), seed: int = 0,
                    inputs: dict[str, np.ndarray] | None = None, opaque_trips: int = 3,
                    use_cache: bool = True, progress: Callable[[int, int], None] | None = None,
                    device: GpuDevice | None = None, argv: Sequence[str] | None = None):
    """`run_program` on the GPU: compile and extract the whole program, run it there. The
    device is made first, so that a missing GPU is said before anything compiles."""
    from sirius.analysis.program import analyse

    device = device or GpuDevice()
    program, kernels, host = analyse([Path(f) for f in files], entry, arch, list(flags),
                                     use_cache, argv)
    return run_on_gpu(host, program, kernels, device=device, seed=seed, inputs=inputs,
                      opaque_trips=opaque_trips, progress=progress)
