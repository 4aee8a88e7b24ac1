"""A generated whole CUDA program: its structure (buffers, launches, host loops), its CUDA text
and its numpy reference.

The structure is the source of truth for both: `source` renders it as a CUDA file in the style
of kernels/*.cu, and `expected` interprets it in numpy (each launch through its op's `apply`),
never reading the CUDA text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.randprog.approx import Approx
from tests.randprog.kernels import Op


@dataclass(frozen=True, slots=True)
class Buffer:
    """One cudaMalloc: the pointer variable it was stored into names it (as in the host model)."""

    name: str
    rows: int
    cols: int
    role: str          # "input" (H2D copied), "output" (D2H copied) or "temp", as in the model
    memset: bool = False
    dtype: str = "float"   # "float", or "ptr" (a table of device pointers: rows x cols of them)

    @property
    def elems(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True, slots=True)
class Global:
    """A `__device__` variable: a float array (`float g[rows * cols]`), a float scalar
    (`float g`, 1 x 1) or a float pointer (`float* g`, dtype "ptr")."""

    name: str
    rows: int
    cols: int
    scalar: bool = False
    dtype: str = "float"

    @property
    def elems(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True, slots=True)
class Ptr:
    """How a kernel reaches the memory of one of its pointer slots.

    `via` "": a pointer argument: variable `var` (which may name another buffer after swaps)
    advanced by offset + sum(stride * loop variable) elements over the enclosing host loops.
    `via` "table": the argument is the pointer table `var` (a `float**` buffer); the kernel
    uses `var[index] + offset` (pointer arithmetic on the loaded pointer).
    `via` "gptr": no argument; the kernel uses `var + offset`, `var` a `__device__ float*`.
    `via` "global": no argument; the kernel uses the `__device__` float array or scalar `var`.
    """

    var: str
    offset: int = 0
    strides: tuple[tuple[str, int], ...] = ()
    via: str = ""
    index: int = 0

    @property
    def is_arg(self) -> bool:
        """Whether the launch passes an argument for this slot."""
        return self.via in ("", "table")

    def at(self, env: dict[str, int]) -> int:
        return self.offset + sum(k * env[v] for v, k in self.strides)

    def c_expr(self) -> str:
        if self.via:
            return self.var
        terms = [f"{v} * {k}" for v, k in self.strides] + ([str(self.offset)] if self.offset
                                                            else [])
        return f"{self.var} + {' + '.join(terms)}" if terms else self.var

    def __str__(self) -> str:
        off = f"{self.offset:+d}" if self.offset else ""
        if self.via == "table":
            return f"{self.var}[{self.index}]{off}"
        if self.via == "gptr":
            return f"*{self.var}{off}"
        if self.via == "global":
            return self.var
        terms = [f"{k}{v}" for v, k in self.strides] + ([str(self.offset)] if self.offset
                                                        else [])
        return f"{self.var}+{'+'.join(terms)}" if terms else self.var


@dataclass(frozen=True, slots=True)
class Call:
    kernel: str
    op: Op
    ptrs: tuple[Ptr, ...]   # one per op slot


@dataclass(frozen=True, slots=True)
class HostLoop:
    """for (int var = 0; var < trips; ++var) { body; swap the two pointer variables of `swap` }"""

    trips: int
    body: tuple[Call | HostLoop, ...]
    swap: tuple[str, str] | None = None
    var: str = "t"

    def calls(self) -> list[Call]:
        out: list[Call] = []
        for s in self.body:
            out += s.calls() if isinstance(s, HostLoop) else [s]
        return out


@dataclass(frozen=True, slots=True)
class DevCopy:
    """cudaMemcpy(dst, src, whole buffer, cudaMemcpyDeviceToDevice) between pointer variables."""

    dst: str
    src: str


@dataclass(frozen=True, slots=True)
class Sync:
    """cudaDeviceSynchronize() between launches (no effect on values)."""


@dataclass(frozen=True, slots=True)
class HostTable:
    """The host stores device pointers (`ptrs`: pointer variables with element offsets) into a
    host array and copies it into the pointer table `table` with cudaMemcpy."""

    table: str
    ptrs: tuple[Ptr, ...]


Step = Call | HostLoop | DevCopy | Sync | HostTable


@dataclass(frozen=True, slots=True)
class Mismatch:
    buffer: str
    index: int
    got: float
    want: float
    tol: float
    count: int

    def __str__(self) -> str:
        return (f"{self.buffer}[{self.index}]: got {self.got!r}, want {self.want!r} "
                f"(|diff| {abs(self.got - self.want):.3g} > tol {self.tol:.3g}; "
                f"{self.count} elements off)")


@dataclass(frozen=True, slots=True)
class RandomProgram:
    seed: int | None
    source: str
    buffers: tuple[Buffer, ...]
    steps: tuple[Step, ...]
    kernels: tuple[str, ...]        # __global__ function names, in definition order
    outputs: tuple[str, ...]        # buffers copied back to the host (role "output")
    summary: str                    # one line per step, for reading a failure
    globals: tuple[Global, ...] = ()  # `__device__` variables (start as zeros / null)

    # ---- shape of the program ----------------------------------------------------------------
    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def names(self, role: str) -> tuple[str, ...]:
        return tuple(b.name for b in self.buffers if b.role == role)

    def float_buffers(self) -> tuple[Buffer, ...]:
        """The buffers of floats (every buffer but the pointer tables)."""
        return tuple(b for b in self.buffers if b.dtype == "float")

    def calls(self) -> list[Call]:
        """Every launch statement, in program order (a loop body once)."""
        out: list[Call] = []
        for s in self.steps:
            out += s.calls() if isinstance(s, HostLoop) else [s] if isinstance(s, Call) else []
        return out

    @property
    def static_launches(self) -> int:
        return len(self.calls())

    @property
    def dynamic_launches(self) -> int:
        return len(self.launch_sequence())

    def launch_sequence(self) -> list[str]:
        """Kernel names in execution order, host loops unrolled."""
        def walk(steps) -> list[str]:
            out: list[str] = []
            for s in steps:
                if isinstance(s, HostLoop):
                    out += walk(s.body) * s.trips
                elif isinstance(s, Call):
                    out.append(s.kernel)
            return out

        return walk(self.steps)

    def write(self, directory: Path, name: str | None = None) -> Path:
        path = Path(directory) / (name or f"randprog_{self.seed}.cu")
        path.write_text(self.source)
        return path

    # ---- reference ---------------------------------------------------------------------------
    def expected(self, initial: dict[str, np.ndarray]) -> dict[str, Approx]:
        """Every float buffer's final contents with its float32 error bound, from the contents
        the program's buffers had when first passed to a launch (`RunResult.initial`; a buffer
        no launch receives, reached only through a pointer table, starts as zeros: the
        generator writes such a buffer before anything reads it). `__device__` arrays and
        scalars are modelled too (from zeros), under their names."""
        mem = {b.name: _Mem(initial.get(b.name, np.zeros(b.elems, np.float32)), b.elems)
               for b in self.float_buffers()}
        mem.update({g.name: _Mem(np.zeros(g.elems, np.float32), g.elems)
                    for g in self.globals if g.dtype == "float"})
        where = {b.name: b.name for b in self.buffers}  # pointer variable -> buffer
        # device pointers held in device memory: table buffer -> entry -> (buffer, offset),
        # `__device__ float*` name -> (buffer, offset)
        tables: dict[str, dict[int, tuple[str, int]]] = {}
        gptrs: dict[str, tuple[str, int]] = {}

        def resolve(p: Ptr, env: dict[str, int]) -> tuple[str, int]:
            if p.via == "table":
                b, off = tables[where[p.var]][p.index]
                return b, off + p.offset
            if p.via == "gptr":
                b, off = gptrs[p.var]
                return b, off + p.offset
            if p.via == "global":
                return p.var, p.offset
            return where[p.var], p.at(env)

        def call(c: Call, env: dict[str, int]) -> None:
            if c.op.kind == "setp":
                if c.op.target:                       # stores into a `__device__ float*`
                    gptrs[c.op.target] = resolve(c.ptrs[0], env)
                else:                                 # stores into the table c.ptrs[0]
                    entries = tables.setdefault(where[c.ptrs[0].var], {})
                    entries.update(enumerate(resolve(p, env) for p in c.ptrs[1:]))
                return
            spans = [(*resolve(p, env), slot.elems)
                     for p, slot in zip(c.ptrs, c.op.slots, strict=True)]
            ins = [mem[b].read(off, n) for (b, off, n), slot in zip(spans, c.op.slots,
                                                                      strict=True)
                   if "r" in slot.mode]
            outs = c.op.apply(ins)
            dsts = [s for s, slot in zip(spans, c.op.slots, strict=True) if "w" in slot.mode]
            for (b, off, n), val in zip(dsts, outs, strict=True):
                mem[b].write(off, n, val)

        def run(steps, env: dict[str, int]) -> None:
            for step in steps:
                if isinstance(step, Call):
                    call(step, env)
                elif isinstance(step, DevCopy):
                    src = mem[where[step.src]]
                    mem[where[step.dst]].write(0, src.value.size, src.approx())
                elif isinstance(step, HostTable):
                    tables[where[step.table]] = {k: resolve(p, env)
                                                 for k, p in enumerate(step.ptrs)}
                elif isinstance(step, HostLoop):
                    for t in range(step.trips):
                        run(step.body, {**env, step.var: t})
                        if step.swap:
                            a, b = step.swap
                            where[a], where[b] = where[b], where[a]

        run(self.steps, {})
        return {name: m.approx() for name, m in mem.items()}

    def reference(self, initial: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every float buffer's (and `__device__` float variable's) final contents (float64,
        exact arithmetic on the float32 inputs)."""
        return {k: v.value for k, v in self.expected(initial).items()}

    def mismatches(self, initial: dict[str, np.ndarray], final: dict[str, np.ndarray],
                   names: tuple[str, ...] | None = None) -> list[Mismatch]:
        """Buffers of `final` (all by default) that differ from the reference by more than the
        float32 error bound (see approx.py); the worst element of each."""
        exp = self.expected(initial)
        out = []
        for name in names or tuple(b.name for b in self.float_buffers()):
            want = exp[name]
            got = as_float32(final[name]).astype(np.float64)
            err = np.abs(got - want.value)
            tol = want.tolerance()
            bad = ~(err <= tol)
            if bad.any():
                nan = np.isnan(err)
                k = int(np.argmax(nan)) if nan.any() else int(np.argmax(np.where(bad, err - tol,
                                                                                 -np.inf)))
                out.append(Mismatch(name, k, float(got[k]), float(want.value[k]), float(tol[k]),
                                    int(bad.sum())))
        return out


def as_float32(a: np.ndarray) -> np.ndarray:
    """A buffer's contents as floats: the executor types a buffer that no launch receives (one
    only written by a device-to-device copy) as bytes."""
    a = np.asarray(a)
    return a.view(np.float32) if a.dtype == np.uint8 else a.astype(np.float32, copy=False)


class _Mem:
    """One buffer's reference contents: value, magnitude and depth per element."""

    def __init__(self, init: np.ndarray, elems: int):
        a = Approx.exact(as_float32(init)[:elems])
        self.value, self.mag, self.depth = a.value.copy(), a.mag.copy(), a.depth.copy()

    def read(self, off: int, n: int) -> Approx:
        s = slice(off, off + n)
        return Approx(self.value[s].copy(), self.mag[s].copy(), self.depth[s].copy())

    def write(self, off: int, n: int, a: Approx) -> None:
        s = slice(off, off + n)
        assert a.value.shape == (n,), (a.value.shape, n)
        self.value[s], self.mag[s], self.depth[s] = a.value, a.mag, a.depth

    def approx(self) -> Approx:
        return Approx(self.value, self.mag, self.depth)
