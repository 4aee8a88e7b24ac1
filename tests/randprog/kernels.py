"""The kernel kinds of random programs: each is the CUDA text of one `__global__` function, its
launch geometry and arguments, and the same math written in numpy (on `Approx` values).

An op has pointer slots, each read ("r"), written ("w") or both ("rw", in place), with the
number of float elements the kernel touches through it. `apply` takes the `Approx` contents of
the read slots (flat, in slot order) and returns those of the written slots (flat, in order).
The reference never looks at the CUDA text: the two are written side by side from the same
description (the docstring of each class).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from tests.randprog import approx as ax
from tests.randprog.access import Bind, access
from tests.randprog.approx import Approx

WARP_SUM = """\
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
"""


def lit(x: float) -> str:
    """A float literal that is exact in float32 (all generated constants are dyadic)."""
    assert np.float32(x) == x, x
    return f"{x!r}f"


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


Dim3 = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Slot:
    mode: str   # "r", "w" or "rw"
    elems: int  # float elements the kernel reads or writes through this pointer


# ---- elementwise -----------------------------------------------------------------------------
# name -> (C expression of v and s, numpy/Approx function, growth of |v| bound given bound b, s)
UNARY = {
    "scale": ("s * v", lambda a, s: ax.scale(s, a), lambda b, s: abs(s) * b),
    "shift": ("v + s", lambda a, s: ax.shift(a, s), lambda b, s: b + abs(s)),
    "affine": ("s * v + 0.5f", lambda a, s: ax.shift(ax.scale(s, a), 0.5),
               lambda b, s: abs(s) * b + 0.5),
    "relu": ("fmaxf(v, 0.0f)", lambda a, s: ax.maximum(a, ax.Approx.const(0.0, a.value.shape)),
             lambda b, s: b),
    "clamp": ("fminf(fmaxf(v, -s), s)", lambda a, s: _clamp(a, abs(s)), lambda b, s: b),
    "square": ("v * v", lambda a, s: ax.mul(a, a), lambda b, s: b * b),
    "tanh": ("tanhf(v)", lambda a, s: ax.lipschitz(a, np.tanh(a.value), 1.0, 4),
             lambda b, s: min(b, 1.0)),
    "sigmoid": ("1.0f / (1.0f + expf(-v))",
                lambda a, s: ax.lipschitz(a, 1.0 / (1.0 + np.exp(-a.value)), 1.0, 6),
                lambda b, s: 1.0),
}

BINARY = {
    "add": ("a + b", lambda a, b, s: ax.add(a, b), lambda x, y, s: x + y),
    "sub": ("a - b", lambda a, b, s: ax.sub(a, b), lambda x, y, s: x + y),
    "mul": ("a * b", lambda a, b, s: ax.mul(a, b), lambda x, y, s: x * y),
    "max": ("fmaxf(a, b)", lambda a, b, s: ax.maximum(a, b), lambda x, y, s: max(x, y)),
    "axpy": ("s * a + b", lambda a, b, s: ax.add(ax.scale(s, a), b),
             lambda x, y, s: abs(s) * x + y),
}


def _clamp(a: Approx, c: float) -> Approx:
    shape = a.value.shape
    return ax.minimum(ax.maximum(a, Approx.const(-c, shape)), Approx.const(c, shape))


@dataclass(frozen=True, slots=True)
class Elementwise:
    """out[i] = f(in0[i], in1[i]..., s) for i < n over a 1-D index space.

    `layout`: "1d" (one thread per element, `if (i < n)`), "stride" (a grid-stride loop over a
    capped grid) or "2d" (a 2-D grid over rows x cols, `if (r < rows && c < cols)`). `fn` names
    a UNARY function (one input) or a BINARY one (two inputs); `inplace` writes the result over
    the first input. `bias`: "col" reads the second input as b[i % cols], "row" as b[i / cols],
    "one" as b[0] (a scalar every thread reads).

    `rev`: the first input is read backwards, x[n - 1 - i] (issue 12, program A's index).
    `side` >= 0: the thread of element `side` also stores its result into z[0] (one float:
    a scalar another kernel may read). `mem` says how the kernel loads and stores: "" plain
    indexing; "fn" through the `__noinline__` device functions `ld_f(p, i)` and
    `st_f(p, i, v)` (pointer arguments); "gfn" likewise, but a slot bound to a `__device__`
    variable goes through that variable's own `__noinline__` getter and setter, which name it
    (`get_g(i)`, `set_g(i, v)`; issue 12, program B); "asm" stores with inline PTX
    (`st.global.f32`). The numbers are the same in every case.
    """

    kind: ClassVar[str] = "map"
    fn: str
    s: float
    rows: int
    cols: int
    layout: str
    block_: Dim3
    inplace: bool = False
    bias: str = ""          # "", "col", "row" or "one" (binary functions only)
    grid_cap: int = 0       # for layout "stride"
    side: int = -1          # element whose result also goes to the scalar slot z (-1: none)
    mem: str = ""           # "", "fn", "gfn" or "asm" (see above)
    rev: bool = False       # read the first input backwards: x[n - 1 - i] (not in place)

    def __repr__(self) -> str:
        # the fields of issue 12 only where set (a summary line stays what it was without them)
        new = {"side": -1, "mem": "", "rev": False}
        parts = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                 if f.name not in new or getattr(self, f.name) != new[f.name]]
        return f"Elementwise({', '.join(parts)})"

    @property
    def n(self) -> int:
        return self.rows * self.cols

    @property
    def binary(self) -> bool:
        return self.fn in BINARY

    @property
    def slots(self) -> tuple[Slot, ...]:
        out: list[Slot] = [Slot("rw" if self.inplace else "r", self.n)]
        if self.binary:
            elems = {"": self.n, "col": self.cols, "row": self.rows, "one": 1}[self.bias]
            out.append(Slot("r", elems))
        if not self.inplace:
            out.append(Slot("w", self.n))
        if self.side >= 0:
            out.append(Slot("w", 1))
        return tuple(out)

    @property
    def slot_names(self) -> tuple[str, ...]:
        """The kernel's pointer parameter of each slot."""
        return (("x",) + (("w",) if self.binary else ()) + (() if self.inplace else ("y",))
                + (("z",) if self.side >= 0 else ()))

    @property
    def block(self) -> Dim3:
        return self.block_

    @property
    def grid(self) -> Dim3:
        bx, by, _ = self.block_
        if self.layout == "2d":
            return (cdiv(self.cols, bx), cdiv(self.rows, by), 1)
        g = cdiv(self.n, bx)
        return (min(g, self.grid_cap) if self.layout == "stride" else g, 1, 1)

    barriers: ClassVar[int] = 0
    static_smem: ClassVar[int] = 0
    smem: ClassVar[int] = 0
    warp_ops: ClassVar[bool] = False

    def scalars(self) -> list[str]:
        tail = [lit(self.s), str(self.n)]
        return tail + ([str(self.cols)] if self.bias or self.layout == "2d" else [])

    def source(self, name: str, binds: Sequence[Bind] = ()) -> str:
        """The kernel text; `binds` (one per slot, see indirect.py) name the `__device__`
        variables the "gfn" accessors use."""
        params = ["float* x" if self.inplace else "const float* x"]
        if self.binary:
            params.append("const float* w")
        if not self.inplace:
            params.append("float* y")
        if self.side >= 0:
            params.append("float* z")
        params += ["float s", "int n"] + (["int cols"] if self.bias or self.layout == "2d"
                                          else [])
        slot = {v: k for k, v in enumerate(self.slot_names)}

        def load(var: str, idx: str) -> str:
            return access(self.mem, binds, slot[var], var, idx)

        def store(var: str, idx: str, val: str) -> str:
            return access(self.mem, binds, slot[var], var, idx, val)

        dst = "x" if self.inplace else "y"
        first = "n - 1 - i" if self.rev else "i"
        if self.binary:
            index = {"": "i", "col": "i % cols", "row": "i / cols", "one": "0"}[self.bias]
            expr = BINARY[self.fn][0]
            body = (f"float a = {load('x', first)};\n        float b = {load('w', index)};"
                    "\n        ")
        else:
            body = f"float v = {load('x', first)};\n        "
            expr = UNARY[self.fn][0]
        if self.side >= 0:
            body += (f"float res = {expr};\n        {store(dst, 'i', 'res')}\n"
                     f"        if (i == {self.side}) {store('z', '0', 'res')}")
        else:
            body += store(dst, "i", expr)
        if self.layout == "1d":
            head = ("    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "    if (i < n) {\n")
        elif self.layout == "stride":
            head = ("    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
                    "         i += blockDim.x * gridDim.x) {\n")
        else:
            head = ("    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "    int r = blockIdx.y * blockDim.y + threadIdx.y;\n"
                    "    if (r < n / cols && c < cols) {\n"
                    "        int i = r * cols + c;\n")
        return (f"__global__ void {name}({', '.join(params)}) {{\n{head}"
                f"        {body}\n    }}\n}}\n")

    def apply(self, ins: list[Approx]) -> list[Approx]:
        if self.rev:
            ins = [ins[0][::-1], *ins[1:]]
        if not self.binary:
            y = UNARY[self.fn][1](ins[0], self.s)
        else:
            a, b = ins
            if self.bias == "col":
                b = b[np.arange(self.n) % self.cols]
            elif self.bias == "row":
                b = b[np.arange(self.n) // self.cols]
            elif self.bias == "one":
                b = b[np.zeros(self.n, dtype=np.int64)]
            y = BINARY[self.fn][1](a, b, self.s)
        return [y] + ([y[self.side:self.side + 1]] if self.side >= 0 else [])

    def bound(self, bounds: list[float]) -> float:
        if self.binary:
            return BINARY[self.fn][2](bounds[0], bounds[1], self.s)
        return UNARY[self.fn][2](bounds[0], self.s)

    @property
    def cost(self) -> int:
        g, b = self.grid, self.block
        return 25 * max(g[0] * g[1] * b[0] * b[1], self.n)


# ---- stencils --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Stencil:
    """A 3-point (rows == 1, 1-D launch) or 5-point (2-D launch) stencil over rows x cols:
    y = c0 * x[i] + c1 * (sum of the in-bounds neighbours); a neighbour outside the array counts
    as 0 (`edge` "zero") or as x[i] itself (`edge` "clamp")."""

    kind: ClassVar[str] = "stencil"
    rows: int
    cols: int
    c0: float
    c1: float
    edge: str
    block_: Dim3

    @property
    def slots(self) -> tuple[Slot, ...]:
        n = self.rows * self.cols
        return (Slot("r", n), Slot("w", n))

    @property
    def block(self) -> Dim3:
        return self.block_

    @property
    def grid(self) -> Dim3:
        return (cdiv(self.cols, self.block_[0]), cdiv(self.rows, self.block_[1]), 1)

    barriers: ClassVar[int] = 0
    static_smem: ClassVar[int] = 0
    smem: ClassVar[int] = 0
    warp_ops: ClassVar[bool] = False

    def scalars(self) -> list[str]:
        return [str(self.rows), str(self.cols)]

    def source(self, name: str) -> str:
        other = "0.0f" if self.edge == "zero" else "x[i]"
        nb = [("c > 0", "x[i - 1]"), ("c + 1 < cols", "x[i + 1]")]
        if self.rows > 1:
            nb += [("r > 0", "x[i - cols]"), ("r + 1 < rows", "x[i + cols]")]
        lines = [f"        float n{k} = ({cond}) ? {val} : {other};"
                 for k, (cond, val) in enumerate(nb)]
        total = " + ".join(f"n{k}" for k in range(len(nb)))
        return (f"__global__ void {name}(const float* x, float* y, int rows, int cols) {{\n"
                "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    int r = blockIdx.y * blockDim.y + threadIdx.y;\n"
                "    if (r < rows && c < cols) {\n"
                "        int i = r * cols + c;\n" + "\n".join(lines) + "\n"
                f"        y[i] = {lit(self.c0)} * x[i] + {lit(self.c1)} * ({total});\n"
                "    }\n}\n")

    def apply(self, ins: list[Approx]) -> list[Approx]:
        x = ins[0].reshape(self.rows, self.cols)
        parts = []
        shifts = [(0, -1), (0, 1)] + ([(-1, 0), (1, 0)] if self.rows > 1 else [])
        r, c = np.meshgrid(np.arange(self.rows), np.arange(self.cols), indexing="ij")
        for dr, dc in shifts:
            rr, cc = r + dr, c + dc
            inside = (rr >= 0) & (rr < self.rows) & (cc >= 0) & (cc < self.cols)
            nb = x[np.clip(rr, 0, self.rows - 1), np.clip(cc, 0, self.cols - 1)]
            fallback = Approx.const(0.0, x.value.shape) if self.edge == "zero" else x
            parts.append(Approx(np.where(inside, nb.value, fallback.value),
                                np.where(inside, nb.mag, fallback.mag),
                                np.where(inside, nb.depth, fallback.depth)))
        y = ax.add(ax.scale(self.c0, x), ax.scale(self.c1, ax.total(parts)))
        return [y.reshape(self.rows * self.cols)]

    def bound(self, bounds: list[float]) -> float:
        k = 4 if self.rows > 1 else 2
        return (abs(self.c0) + k * abs(self.c1)) * bounds[0]

    @property
    def cost(self) -> int:
        g, b = self.grid, self.block
        return 40 * g[0] * g[1] * b[0] * b[1]


# ---- transpose -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Transpose:
    """y (cols x rows) = x (rows x cols) transposed; naive (tile == 0: one thread per element,
    2-D grid over x) or through a shared tile[T][T + 1] (block T x rows_per_pass, each thread
    moving T / rows_per_pass elements, one __syncthreads)."""

    kind: ClassVar[str] = "transpose"
    rows: int
    cols: int
    tile: int
    rows_per_pass: int
    block_: Dim3 = (16, 16, 1)

    @property
    def slots(self) -> tuple[Slot, ...]:
        n = self.rows * self.cols
        return (Slot("r", n), Slot("w", n))

    @property
    def block(self) -> Dim3:
        return (self.tile, self.rows_per_pass, 1) if self.tile else self.block_

    @property
    def grid(self) -> Dim3:
        if self.tile:
            return (cdiv(self.cols, self.tile), cdiv(self.rows, self.tile), 1)
        return (cdiv(self.cols, self.block_[0]), cdiv(self.rows, self.block_[1]), 1)

    smem: ClassVar[int] = 0
    warp_ops: ClassVar[bool] = False

    @property
    def barriers(self) -> int:
        return 1 if self.tile else 0

    @property
    def static_smem(self) -> int:
        return 4 * self.tile * (self.tile + 1)

    def scalars(self) -> list[str]:
        return [str(self.rows), str(self.cols)]

    def source(self, name: str) -> str:
        head = f"__global__ void {name}(const float* x, float* y, int rows, int cols) {{\n"
        if not self.tile:
            return (head + "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "    int r = blockIdx.y * blockDim.y + threadIdx.y;\n"
                    "    if (r < rows && c < cols) y[c * rows + r] = x[r * cols + c];\n}\n")
        t, p = self.tile, self.rows_per_pass
        return (head + f"    __shared__ float tile[{t}][{t + 1}];\n"
                "    int tx = threadIdx.x, ty = threadIdx.y;\n"
                f"    int c = blockIdx.x * {t} + tx;\n"
                f"    int r = blockIdx.y * {t} + ty;\n"
                f"    for (int j = 0; j < {t}; j += {p})\n"
                "        if (r + j < rows && c < cols) tile[ty + j][tx] = x[(r + j) * cols + c];\n"
                "    __syncthreads();\n"
                f"    int oc = blockIdx.y * {t} + tx;\n"
                f"    int orow = blockIdx.x * {t} + ty;\n"
                f"    for (int j = 0; j < {t}; j += {p})\n"
                "        if (orow + j < cols && oc < rows) y[(orow + j) * rows + oc] = "
                "tile[tx][ty + j];\n}\n")

    def apply(self, ins: list[Approx]) -> list[Approx]:
        return [ins[0].reshape(self.rows, self.cols).T.reshape(self.rows * self.cols)]

    def bound(self, bounds: list[float]) -> float:
        return bounds[0]

    @property
    def cost(self) -> int:
        g, b = self.grid, self.block
        per = 30 * (self.tile // self.rows_per_pass) if self.tile else 20
        return per * g[0] * g[1] * b[0] * b[1]


# ---- matmul ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Matmul:
    """c (m x n) = a (m x k) @ b (k x n); tiled (shared As[T][T], Bs[T][T], zero-filled past
    the edges, two __syncthreads per k-tile) or naive (tile == 0, a k-loop per thread)."""

    kind: ClassVar[str] = "matmul"
    m: int
    n: int
    k: int
    tile: int
    block_: Dim3 = (16, 16, 1)

    @property
    def slots(self) -> tuple[Slot, ...]:
        return (Slot("r", self.m * self.k), Slot("r", self.k * self.n),
                Slot("w", self.m * self.n))

    @property
    def block(self) -> Dim3:
        return (self.tile, self.tile, 1) if self.tile else self.block_

    @property
    def grid(self) -> Dim3:
        bx, by, _ = self.block
        return (cdiv(self.n, bx), cdiv(self.m, by), 1)

    smem: ClassVar[int] = 0
    warp_ops: ClassVar[bool] = False

    @property
    def barriers(self) -> int:
        return 2 if self.tile else 0

    @property
    def static_smem(self) -> int:
        return 2 * 4 * self.tile * self.tile

    def scalars(self) -> list[str]:
        return [str(self.m), str(self.n), str(self.k)]

    def source(self, name: str) -> str:
        head = (f"__global__ void {name}(const float* a, const float* b, float* c, "
                "int m, int n, int k) {\n"
                "    int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
                "    int col = blockIdx.x * blockDim.x + threadIdx.x;\n")
        if not self.tile:
            return (head + "    if (row < m && col < n) {\n"
                    "        float acc = 0.0f;\n"
                    "        for (int q = 0; q < k; ++q) acc += a[row * k + q] * b[q * n + col];\n"
                    "        c[row * n + col] = acc;\n    }\n}\n")
        t = self.tile
        return (head + f"    __shared__ float As[{t}][{t}];\n"
                f"    __shared__ float Bs[{t}][{t}];\n"
                "    int tx = threadIdx.x, ty = threadIdx.y;\n"
                "    float acc = 0.0f;\n"
                f"    for (int k0 = 0; k0 < k; k0 += {t}) {{\n"
                "        As[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : 0.0f;\n"
                "        Bs[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : 0.0f;\n"
                "        __syncthreads();\n"
                f"        for (int q = 0; q < {t}; ++q) acc += As[ty][q] * Bs[q][tx];\n"
                "        __syncthreads();\n"
                "    }\n"
                "    if (row < m && col < n) c[row * n + col] = acc;\n}\n")

    def apply(self, ins: list[Approx]) -> list[Approx]:
        a = ins[0].reshape(self.m, self.k)
        b = ins[1].reshape(self.k, self.n)
        return [ax.matmul(a, b).reshape(self.m * self.n)]

    def bound(self, bounds: list[float]) -> float:
        return self.k * bounds[0] * bounds[1]

    @property
    def cost(self) -> int:
        g, b = self.grid, self.block
        threads = g[0] * g[1] * b[0] * b[1]
        steps = cdiv(self.k, self.tile) * (self.tile * 6 + 30) if self.tile else self.k * 8
        return threads * (steps + 20)


# ---- reductions ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Reduce:
    """Block sums. `per_row`: y[r] = sum of row r of x (rows x cols), one block per row, each
    thread summing a strided part of the row. Otherwise (partial sums): y[b] = sum of
    x[b * B .. b * B + B) (zero past n = rows * cols), one block per B elements. The block
    combines its threads with warp shuffles (`tree` == False: warp_sum, per-warp partials in
    shared memory, one __syncthreads, warp 0 finishes) or with a shared-memory tree (block size
    a power of two, a __syncthreads per level; its array static or `extern` with the size as
    the launch's dynamic shared memory)."""

    kind: ClassVar[str] = "reduce"
    rows: int
    cols: int
    per_row: bool
    threads: int
    tree: bool
    dynamic: bool = False   # the tree's shared array is `extern __shared__` (launch smem)

    @property
    def smem(self) -> int:
        return 4 * self.threads if self.dynamic else 0

    @property
    def static_smem(self) -> int:
        return 0 if self.dynamic else 4 * self.threads if self.tree else 4 * 32

    @property
    def barriers(self) -> int:
        return 2 if self.tree else 1

    @property
    def warp_ops(self) -> bool:
        return not self.tree

    @property
    def outputs(self) -> int:
        return self.rows if self.per_row else cdiv(self.rows * self.cols, self.threads)

    @property
    def slots(self) -> tuple[Slot, ...]:
        return (Slot("r", self.rows * self.cols), Slot("w", self.outputs))

    @property
    def block(self) -> Dim3:
        return (self.threads, 1, 1)

    @property
    def grid(self) -> Dim3:
        return (self.outputs, 1, 1)

    def scalars(self) -> list[str]:
        return [str(self.cols if self.per_row else self.rows * self.cols)]

    def source(self, name: str) -> str:
        if self.per_row:
            load = ("    float v = 0.0f;\n"
                    "    for (int j = tid; j < n; j += blockDim.x) v += x[blockIdx.x * n + j];\n")
        else:
            load = ("    int i = blockIdx.x * blockDim.x + tid;\n"
                    "    float v = (i < n) ? x[i] : 0.0f;\n")
        head = (f"__global__ void {name}(const float* x, float* y, int n) {{\n"
                "    int tid = threadIdx.x;\n")
        if self.tree:
            decl = ("    extern __shared__ float part[];\n" if self.dynamic
                    else f"    __shared__ float part[{self.threads}];\n")
            return (head + decl + load +
                    "    part[tid] = v;\n"
                    "    __syncthreads();\n"
                    "    for (int h = blockDim.x / 2; h > 0; h >>= 1) {\n"
                    "        if (tid < h) part[tid] += part[tid + h];\n"
                    "        __syncthreads();\n"
                    "    }\n"
                    "    if (tid == 0) y[blockIdx.x] = part[0];\n}\n")
        return (head + "    __shared__ float sums[32];\n" + load +
                "    v = warp_sum(v);\n"
                "    if ((tid & 31) == 0) sums[tid >> 5] = v;\n"
                "    __syncthreads();\n"
                "    if (tid < 32) {\n"
                "        v = (tid < (int)(blockDim.x >> 5)) ? sums[tid] : 0.0f;\n"
                "        v = warp_sum(v);\n"
                "        if (tid == 0) y[blockIdx.x] = v;\n"
                "    }\n}\n")

    def apply(self, ins: list[Approx]) -> list[Approx]:
        x = ins[0]
        if self.per_row:
            return [ax.sum_rows(x.reshape(self.rows, self.cols))]
        n, b = self.rows * self.cols, self.threads
        pad = self.outputs * b - n
        zeros = Approx.const(0.0, (pad,))
        padded = Approx(np.concatenate([x.value, zeros.value]),
                        np.concatenate([x.mag, zeros.mag]),
                        np.concatenate([x.depth, zeros.depth]))
        return [ax.sum_rows(padded.reshape(self.outputs, b))]

    def bound(self, bounds: list[float]) -> float:
        return (self.cols if self.per_row else self.threads) * bounds[0]

    @property
    def out_shape(self) -> tuple[int, int]:
        return (self.outputs, 1)

    @property
    def cost(self) -> int:
        per = (cdiv(self.cols, self.threads) * 8 if self.per_row else 8) + 120
        return self.outputs * self.threads * per


Op = Elementwise | Stencil | Transpose | Matmul | Reduce
