"""What a GPU launch needs to know about PTX: the kernels' parameter lists (types, sizes,
alignment), the architecture a module targets, the architecture to compile for on a given
device, and the packing of argument values into CUDA's parameter buffer.

The parameter buffer is what `cuLaunchKernel` takes through `CU_LAUNCH_PARAM_BUFFER_POINTER`:
every parameter at the next offset that is a multiple of its alignment (its size for scalars,
`.align N` for a by-value aggregate), little-endian. `cuLaunchCooperativeKernel` takes one
pointer per parameter instead: the offsets returned with the buffer say where each one is.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from sirius.runtime.gpu.driver import GpuError

# The newest PTX ISA version each CUDA driver release accepts (PTX ISA manual, release notes):
# a module whose `.version` is newer fails to load with CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
DRIVER_PTX = {12000: 80, 12010: 81, 12020: 82, 12030: 83, 12040: 84, 12050: 85, 12060: 85,
              12080: 87, 12090: 88, 13000: 90}

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(([^)]*)\)", re.S)
_TYPE = re.compile(r"\.([usbf])(8|16|32|64)\b")
_ALIGN = re.compile(r"\.align\s+(\d+)")
_ARRAY = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str  # u, s, b or f (PTX's unsigned, signed, untyped bits, float)
    bits: int
    count: int = 0  # > 0: a by-value aggregate of `count` elements (`.b8 name[16]`)
    align: int = 0

    @property
    def size(self) -> int:
        return self.bits // 8 * max(1, self.count)

    @property
    def alignment(self) -> int:
        return self.align if self.count else self.bits // 8


def entries(ptx: str) -> dict[str, tuple[Param, ...]]:
    """Every kernel (`.entry`) of a PTX module with its parameters, in order."""
    out: dict[str, tuple[Param, ...]] = {}
    for m in _ENTRY.finditer(ptx):
        params = []
        for text in m.group(2).split(","):
            text = text.strip()
            if not text:
                continue
            ty = _TYPE.search(text)
            if ty is None:
                raise GpuError(f"cannot read the PTX parameter {text!r} of kernel {m.group(1)}")
            arr = _ARRAY.search(text)
            al = _ALIGN.search(text)
            params.append(Param(text.split()[-1].split("[")[0], ty.group(1), int(ty.group(2)),
                                int(arr.group(1)) if arr else 0,
                                int(al.group(1)) if al and arr else 0))
        out[m.group(1)] = tuple(params)
    return out


def target(ptx: str) -> str | None:
    """The architecture a module targets (`.target sm_80` -> `sm_80`)."""
    m = re.search(r"^\s*\.target\s+(sm_\d+)", ptx, re.M)
    return m.group(1) if m else None


def ptx_version(ptx: str) -> int | None:
    """`.version 8.8` -> 88."""
    m = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.M)
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def sm_number(arch: str) -> int:
    m = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if m is None:
        raise GpuError(f"{arch!r} is not a GPU architecture")
    return int(m.group(1))


def compile_arch(capability: tuple[int, int], known: tuple[str, ...]) -> str:
    """The architecture to emit PTX for on a device of `capability`: its own when the backend
    knows it, else the newest known one below it (the driver compiles that PTX for the device)."""
    own = capability[0] * 10 + capability[1]
    fits = [a for a in known if sm_number(a) <= own]
    if not fits:
        raise GpuError(f"the GPU has compute capability {capability[0]}.{capability[1]}; the "
                       f"backend emits PTX for {', '.join(known)} only")
    return max(fits, key=sm_number)


def driver_ptx(driver_version: int) -> int | None:
    """The newest PTX ISA version a driver of `driver_version` (13000 = CUDA 13.0) loads."""
    known = [v for v in sorted(DRIVER_PTX) if v <= driver_version]
    return DRIVER_PTX[known[-1]] if known else None


def pack(params: tuple[Param, ...], args: list, kernel: str) -> tuple[bytes, tuple[int, ...]]:
    """The parameter buffer for `args` (ints for pointers and integers, floats or ints for
    floats; a float for untyped bits, such as a `half` passed as `.b16`, is stored as a float
    of that width) and the offset of each parameter in it."""
    if len(args) != len(params):
        raise GpuError(f"kernel {kernel} takes {len(params)} arguments, {len(args)} given")
    buf = bytearray()
    offsets = []
    for i, (p, v) in enumerate(zip(params, args, strict=True)):
        if p.count:
            raise GpuError(f"kernel {kernel}: parameter {i} is an aggregate passed by value "
                           f"({p.size} bytes); sirius passes scalars and pointers only")
        pad = -len(buf) % p.alignment
        buf += bytes(pad)
        offsets.append(len(buf))
        buf += _scalar(p, v, kernel, i)
    return bytes(buf), tuple(offsets)


_FLOAT = {16: "<e", 32: "<f", 64: "<d"}


def _scalar(p: Param, v, kernel: str, i: int) -> bytes:
    if p.kind == "f" or (p.kind == "b" and isinstance(v, float) and p.bits in _FLOAT):
        return struct.pack(_FLOAT[p.bits], float(v))
    if isinstance(v, float):
        if not v.is_integer():
            raise GpuError(f"kernel {kernel}: parameter {i} is a {p.bits}-bit integer, given "
                           f"{v!r}")
        v = int(v)
    return (int(v) & ((1 << p.bits) - 1)).to_bytes(p.bits // 8, "little")
