"""The plan of an imported TVM model: device buffers, launches, outputs (no TVM needed).

`sirius.frontend.tvm_plan` builds a `ProgramPlan` from TVM's IR; `sirius.frontend.tvm_emit`
turns it into a CUDA program and a JSON description. Everything here is plain data, so tests and
the executor read the committed JSON without TVM installed.

Host-side values of inputs and parameters are a deterministic pattern (`Fill`), the same in the
generated C code and in `fill_values` (numpy), bit for bit:

    value[i] = (float)((((i % 2001) * 7919 + seed) % 2001) - 1000) * scale

i.e. integers in [-1000, 1000] times a float32 `scale`; one float32 rounding, no contraction.
A float16 buffer holds that float32 value rounded to half (round to nearest even: numpy's
`astype(float16)`, and `sirius_f2h` in the generated C).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_DTYPE_BYTES = {"float32": 4, "float16": 2, "float64": 8, "int32": 4, "int64": 8, "int8": 1,
                "uint8": 1, "bool": 1, "bfloat16": 2, "int16": 2, "uint32": 4}
# float16 on the host: its bits (the host never computes with it)
_C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "int64_t",
            "int8": "int8_t", "uint8": "char", "int16": "int16_t", "uint32": "uint32_t",
            "float16": "unsigned short"}
FILL_DTYPES = ("float32", "float16")  # inputs and parameters the host fills
ROLES = ("input", "param", "output", "temp")


def dtype_bytes(dtype: str) -> int:
    if dtype not in _DTYPE_BYTES:
        raise ValueError(f"unsupported dtype {dtype}")
    return _DTYPE_BYTES[dtype]


def c_type(dtype: str) -> str:
    if dtype not in _C_TYPES:
        raise ValueError(f"dtype {dtype} has no host C type here")
    return _C_TYPES[dtype]


@dataclass(frozen=True, slots=True)
class Fill:
    """How the host fills an input or parameter (see the module docstring)."""

    seed: int
    scale: float  # a float32 value

    def to_json(self) -> dict:
        return {"seed": self.seed, "scale": self.scale}


def fill_values(n: int, fill: Fill, dtype: str = "float32") -> np.ndarray:
    i = np.arange(n, dtype=np.int64)
    k = ((i % 2001) * 7919 + fill.seed) % 2001 - 1000
    if dtype == "float32":
        return k.astype(np.float32) * np.float32(fill.scale)
    if dtype == "float16":
        return (k.astype(np.float32) * np.float32(fill.scale)).astype(np.float16)
    if dtype in ("int32", "int64"):
        return k.astype(dtype)
    raise ValueError(f"no fill for dtype {dtype}")


@dataclass(frozen=True, slots=True)
class DeviceBuffer:
    """One cudaMalloc: an input, a parameter, an output, or one of TVM's storages (temp)."""

    name: str                      # the device pointer variable: d_in_x, d_storage0, ...
    role: str                      # input | param | output | temp
    bytes: int
    dtype: str                     # element type (uint8 for storages)
    shape: tuple[int, ...] | None  # tensor shape (inputs, params, outputs)
    relax_name: str | None         # the Relax variable it comes from
    fill: Fill | None = None       # host values of inputs and params
    tensors: tuple[str, ...] = field(default=())  # Relax tensors placed in a storage

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "role": self.role, "bytes": self.bytes,
                     "dtype": self.dtype, "shape": None if self.shape is None
                     else list(self.shape), "relax": self.relax_name}
        if self.fill is not None:
            out["fill"] = self.fill.to_json()
        if self.tensors:
            out["tensors"] = list(self.tensors)
        return out


@dataclass(frozen=True, slots=True)
class LaunchArg:
    buffer: str | None        # pointer argument: buffer name ...
    offset: int               # ... and byte offset
    scalar: int | float | None  # scalar argument

    def to_json(self) -> dict:
        if self.buffer is not None:
            return {"buffer": self.buffer, "offset": self.offset}
        return {"scalar": self.scalar}


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    kernel: str
    primfunc: str  # the PrimFunc (Relax call) it belongs to
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int      # dynamic shared memory bytes
    args: tuple[LaunchArg, ...]

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "primfunc": self.primfunc, "grid": list(self.grid),
                "block": list(self.block), "smem": self.smem,
                "args": [a.to_json() for a in self.args]}


@dataclass(frozen=True, slots=True)
class OutputCopy:
    """An output: buffer `name` copied to the host; when `source` is set, the value lives in
    (source, offset) and is first copied device-to-device into `name`."""

    name: str
    source: str | None
    offset: int
    bytes: int
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict:
        return {"buffer": self.name, "bytes": self.bytes, "shape": list(self.shape),
                "dtype": self.dtype, "from": None if self.source is None
                else {"buffer": self.source, "offset": self.offset}}


@dataclass(frozen=True, slots=True)
class ProgramPlan:
    name: str
    buffers: tuple[DeviceBuffer, ...]   # allocation order
    launches: tuple[KernelLaunch, ...]  # launch order
    outputs: tuple[OutputCopy, ...]
    calls: tuple[str, ...]              # PrimFunc calls of the Relax function, in order

    def buffer(self, name: str) -> DeviceBuffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def host_values(self) -> dict[str, np.ndarray]:
        """The values the generated host code copies into every input and parameter."""
        out = {}
        for b in self.buffers:
            if b.fill is not None:
                n = int(np.prod(b.shape, dtype=np.int64))
                out[b.name] = fill_values(n, b.fill, b.dtype).reshape(b.shape)
        return out
