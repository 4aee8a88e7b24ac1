"""A whole CUDA program compiled and analysed up to its host model and kernel facts.

    from sirius.analysis.program import analyse
    program, kernels, host_program = analyse(["prog.cu"], arch="sm_90")

`program` is the frontend's `Program` (device and host LLVM IR), `kernels` the `KernelInfo` facts
of every kernel, `host_program` the `HostProgram`. Every later stage (UAR, fusion, the runtime)
starts from these three values.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sirius._version import __version__
from sirius.analysis.host.extract import extract_host_program
from sirius.analysis.irview import build_view
from sirius.analysis.kernel.facts import kernel_infos, kernel_to_json
from sirius.analysis.uar.build import UAR, build_uar
from sirius.frontend import compile_program


def analyse(files, entry: str = "main", arch: str = "sm_80", flags: list[str] | None = None,
            use_cache: bool = True, argv: Sequence[str] | None = None):
    """Compile and extract: (Program, kernel facts, HostProgram); `argv`: the program's
    arguments (--args), None when they are not known."""
    paths = [Path(f) for f in files]
    program = compile_program(paths, arch=arch, extra_flags=list(flags or ()),
                              use_cache=use_cache)
    device = build_view(program.device_module)
    host = build_view(program.host_module)
    kernels = kernel_infos(device)
    host_program = extract_host_program(host, device, entry, argv)
    return program, kernels, host_program


def inspect_document(files, entry: str = "main", arch: str = "sm_80",
                     flags: list[str] | None = None, use_cache: bool = True,
                     argv: Sequence[str] | None = None) -> dict:
    """The `sirius inspect --json` document (docs/host-model.md is its schema)."""
    paths = [Path(f) for f in files]
    return document(paths, arch, *analyse(paths, entry, arch, flags, use_cache, argv)[1:])


def document(paths: list[Path], arch: str, kernels, host_program) -> dict:
    return {
        "sirius": __version__,
        "files": [str(p) for p in paths],
        "arch": arch,
        "kernels": [kernel_to_json(k) for k in kernels],
        "host": host_program.to_json(),
    }


def analyze(files: list[Path], entry: str = "main", arch: str = "sm_80",
            flags: list[str] | None = None, use_cache: bool = True,
            progress: Callable[[str], None] = lambda _: None,
            argv: Sequence[str] | None = None) -> UAR:
    """Compile, extract the host model and build the UAR of a program."""
    t0 = time.perf_counter()
    progress(f"compiling and extracting the host model of {', '.join(map(str, files))}")
    program, kernels, host_program = analyse(files, entry, arch, flags, use_cache, argv)
    t1 = time.perf_counter()
    n, k = len(host_program.launches()), len(kernels)
    progress(f"kernel summaries and dependences: {n} launch site{'s' * (n != 1)}, "
             f"{k} kernel{'s' * (k != 1)}")
    uar = build_uar(build_view(program.device_module), kernels, host_program)
    uar.seconds["frontend"] = t1 - t0
    uar.seconds["total"] = time.perf_counter() - t0
    return uar
