"""Finding clang-22 and the CUDA toolkit, and the flags that work with this toolkit.

Facts behind the flags are in DESIGN.md ("Toolchain facts"): clang-22 cannot read CUDA 13's
version, so device-only compiles of files with launches need `-target-sdk-version=12.9`; the CUDA
wrapper includes a curand header CUDA 13 lacks; old programs call runtime functions CUDA 13
removed, which a force-included compatibility header maps to their replacements.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sirius.diagnostics import ToolchainError

CLANG_NAMES = ("clang-22",)

# Runtime functions CUDA 13 removed, mapped to what replaced them, and the cudaDeviceProp fields
# it removed, put back (docs/troubleshooting.md#removed-device-properties): `cudaDeviceProp` names
# a struct that extends the toolkit's with them, so informational code that prints them compiles.
# cudaGetDeviceProperties does not fill them; the host model knows no device property's value
# (a size or launch configuration computed from one is refused). Only defined when the toolkit
# no longer declares them, so a program compiled against an older toolkit is unaffected. A C
# file includes the runtime API first (the CUDA wrapper does so for CUDA C++); C has no struct
# inheritance, so the toolkit's struct is an anonymous member there (-fms-extensions).
REMOVED_DEVICE_PROPS = ("clockRate", "deviceOverlap", "kernelExecTimeoutEnabled", "computeMode",
                        "maxTexture1DLinear", "memoryClockRate",
                        "singleToDoublePrecisionPerfRatio", "cooperativeMultiDeviceLaunch")
_PROPS = ", ".join(REMOVED_DEVICE_PROPS)
COMPAT_HEADER = f"""\
/* sirius compatibility header: force-included into every compile (see DESIGN.md). */
#pragma once
#if !defined(__cplusplus) && !defined(__CUDACC__)
#include <cuda_runtime_api.h>
#endif
#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
#define cudaThreadSynchronize() cudaDeviceSynchronize()
#define cudaThreadExit() cudaDeviceReset()
#ifdef __cplusplus
struct sirius_cudaDeviceProp : cudaDeviceProp {{ int {_PROPS}; }};
#else
struct sirius_cudaDeviceProp {{ struct cudaDeviceProp; int {_PROPS}; }};
#endif
#define cudaDeviceProp sirius_cudaDeviceProp
#endif
"""


@dataclass(frozen=True, slots=True)
class Toolchain:
    clang: str
    clang_version: str
    cuda_path: Path
    private_include: Path

    @property
    def compat_header(self) -> Path:
        return self.private_include / "sirius_compat.h"

    def fingerprint(self) -> str:
        """Changes whenever a different clang, toolkit or private header would change the IR."""
        h = hashlib.sha256()
        h.update(self.clang_version.encode())
        h.update(str(self.cuda_path.resolve()).encode())
        version_file = self.cuda_path / "include" / "cuda_runtime_api.h"
        if version_file.exists():
            h.update(str(version_file.stat().st_size).encode())
        h.update(COMPAT_HEADER.encode())
        return h.hexdigest()[:16]


def cuda_version(cuda_path: Path) -> tuple[int, int] | None:
    """(major, minor) of the toolkit, from CUDART_VERSION in cuda_runtime_api.h (13000 -> 13.0)."""
    try:
        text = (cuda_path / "include" / "cuda_runtime_api.h").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"^#define\s+CUDART_VERSION\s+(\d+)", text, re.M)
    if not m:
        return None
    v = int(m.group(1))
    return v // 1000, v % 1000 // 10


# TVM's CUDA prelude tests nvcc's version macros, which clang does not define: with them
# undefined it defines its own `htanh` (for CUDA < 12.8), which CUDA 13's cuda_fp16.hpp also
# defines ("redefinition of htanh"). A file that carries the prelude gets the toolkit's version.
_TVM_PRELUDE = re.compile(r"CUDA_UNSUPPORTED_HALF_MATH_(?:UNARY|BINARY)\b|TVM_ENABLE_L2_PREFETCH")


def prelude_flags(tc: Toolchain, source: str, extra: list[str]) -> list[str]:
    """The flags a source needs beyond the user's: nvcc's version macros for TVM's prelude,
    unless the user defines them."""
    if not _TVM_PRELUDE.search(source) or any("__CUDACC_VER_MAJOR__" in f for f in extra):
        return []
    version = cuda_version(tc.cuda_path)
    if version is None:
        return []
    return [f"-D__CUDACC_VER_MAJOR__={version[0]}", f"-D__CUDACC_VER_MINOR__={version[1]}"]


def cache_root() -> Path:
    if env := os.environ.get("SIRIUS_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sirius"


def find_clang() -> str:
    if env := os.environ.get("SIRIUS_CLANG"):
        return env
    for name in CLANG_NAMES:
        if path := shutil.which(name):
            return path
    raise ToolchainError(
        "clang-22 was not found on PATH. Install Debian's clang-22 "
        "(as root: apt-get update && apt-get install -y clang-22) or set SIRIUS_CLANG."
    )


def find_opt() -> str:
    """LLVM's `opt` of the clang-22 toolchain: $SIRIUS_OPT, `opt-22` on PATH, or `opt` beside
    the real clang-22 binary (Debian: /usr/lib/llvm-22/bin)."""
    if env := os.environ.get("SIRIUS_OPT"):
        return env
    if path := shutil.which("opt-22"):
        return path
    beside = Path(os.path.realpath(find_clang())).parent / "opt"
    if beside.exists():
        return str(beside)
    raise ToolchainError(
        "LLVM's opt (22) was not found: no opt-22 on PATH and no opt beside clang-22. It comes "
        "with Debian's llvm-22 (as root: apt-get install -y llvm-22), or set SIRIUS_OPT.")


def find_cuda() -> Path:
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for cand in candidates:
        if cand and (Path(cand) / "include" / "cuda_runtime.h").exists():
            return Path(cand)
    raise ToolchainError(
        "no CUDA toolkit headers found (looked in $CUDA_HOME, $CUDA_PATH, /usr/local/cuda); "
        "set CUDA_HOME to the toolkit's root"
    )


def _write_private_include(root: Path) -> Path:
    inc = root / "include"
    inc.mkdir(parents=True, exist_ok=True)
    # clang's CUDA wrapper includes this header; CUDA 13 no longer ships it.
    stub = inc / "curand_mtgp32_kernel.h"
    if not stub.exists():
        stub.write_text("/* empty: provided by sirius, missing from CUDA 13 */\n")
    compat = inc / "sirius_compat.h"
    if not compat.exists() or compat.read_text() != COMPAT_HEADER:
        compat.write_text(COMPAT_HEADER)
    return inc


@functools.cache
def toolchain() -> Toolchain:
    clang = find_clang()
    try:
        out = subprocess.run([clang, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise ToolchainError(f"cannot run {clang} --version: {e}") from e
    version = out.stdout.splitlines()[0] if out.stdout else "unknown"
    cuda = find_cuda()
    try:
        inc = _write_private_include(cache_root())
    except OSError as e:  # an unwritable cache: the two headers go to a temporary directory
        from sirius.frontend.cache import private_root

        inc = _write_private_include(private_root(cache_root(), e))
    return Toolchain(clang=clang, clang_version=version, cuda_path=cuda, private_include=inc)


def common_flags(tc: Toolchain, arch: str) -> list[str]:
    return [
        "-x", "cuda",
        f"--cuda-path={tc.cuda_path}",
        f"--cuda-gpu-arch={arch}",
        "-nocudalib",
        "-Wno-unknown-cuda-version",
        "-isystem", str(tc.private_include),
        "-include", str(tc.compat_header),
        "-g",
        "-fno-discard-value-names",
        "-S", "-emit-llvm",
    ]


def device_flags(tc: Toolchain, arch: str) -> list[str]:
    # -O2: the device IR is what later stages analyse and run; -nocudalib keeps libdevice calls.
    # For optimized device code clang's -g only keeps line tables; full debug info (parameter
    # names and C types) needs the explicit debug-info kind.
    return common_flags(tc, arch) + [
        "--cuda-device-only", "-Xclang", "-target-sdk-version=12.9", "-O2",
        "-Xclang", "-debug-info-kind=constructor",
    ]


# Old C that newer compilers reject by default (implicit declarations, implicit int, int <->
# pointer conversions) is accepted with a warning, as C compilers did when it was written.
_OLD_C_FLAGS = [
    "-Wno-error=implicit-function-declaration", "-Wno-error=implicit-int",
    "-Wno-error=int-conversion", "-Wno-error=incompatible-pointer-types",
]


def c_host_flags(tc: Toolchain) -> list[str]:
    """A `.c` host file is compiled as C (it may not be valid C++: `int new;`, malloc without
    a cast), for the host only, with the host flags of a `.cu` file and the toolkit's headers
    (for cuda_runtime_api.h)."""
    return [
        "-x", "c", "-fms-extensions", "-Wno-microsoft-anon-tag",
        "-isystem", str(tc.private_include),
        "-isystem", str(tc.cuda_path / "include"),
        "-include", str(tc.compat_header),
        "-g", "-fno-discard-value-names", "-S", "-emit-llvm",
        *_OLD_C_FLAGS,
        "-O1", "-fno-unroll-loops", "-fno-vectorize", "-fno-slp-vectorize",
    ]


def host_flags(tc: Toolchain, arch: str) -> list[str]:
    # -O1 promotes locals to SSA while keeping host loops as loops; -O2 rewrites short loops
    # into flag-driven forms (measured), which hides their trip counts.
    # -finline-hint-functions: only functions marked inline (explicitly, or implicitly as a
    # member defined in its class: std::vector's) are inlined; the others, the launch stubs
    # clang writes for each kernel among them, stay functions the host model follows calls
    # into. A program of written-out launches then has one stub per kernel, not one copy per
    # launch (paper lstm_large, 4,090 launches: host IR 31 -> 6 MB, clang's host side 15 -> 7
    # s, the same host program; docs/host-model.md "Launch stubs").
    return common_flags(tc, arch) + [
        "--cuda-host-only", "-O1", "-fno-unroll-loops", "-fno-vectorize", "-fno-slp-vectorize",
        "-finline-hint-functions",
    ]
