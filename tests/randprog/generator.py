"""Random whole CUDA programs for the executor and fusion tests.

    generate(seed) -> RandomProgram          # reproducible: the same seed, the same program
    programs()     -> hypothesis strategy    # the same generator driven by hypothesis draws
    python scripts/fuzz.py --seed S --count 1   # re-run program S through sirius

A program is a DAG of launches over float buffers, in the style of kernels/*.cu:
  * elementwise maps: unary (scale, shift, affine, relu, clamp, square, tanhf, sigmoid) and
    binary (+, -, *, fmaxf, s*a+b) with a scalar argument, broadcasts b[i % cols] / b[i / cols],
    in place or not, launched 1-D (`if (i < n)`), as a grid-stride loop over a capped grid, or
    2-D over rows x cols;
  * 3- and 5-point stencils with bounds checks (zero or clamped edges);
  * transposes, naive or through a shared tile[T][T+1] with __syncthreads;
  * matrix products, naive or with shared tiles and two barriers per k-tile;
  * block sums with warp shuffles (+ per-warp shared partials) or a shared-memory tree (static
    or `extern` shared array with the launch's dynamic shared memory), one block per row or
    partial sums per block (a GLOBAL dependence for whoever reads them);
  * device-to-device copies and cudaDeviceSynchronize between launches;
  * in about 40% of the programs (extras.py, issue 12): pointer tables in device memory filled
    by a one-thread `setp` launch and read or written through by later launches
    (`x = tab[k] - d`), `__device__ float*` variables used the same way, `__device__` float
    arrays and scalars (a scalar from one element's thread, read back as a broadcast b[0]),
    maps that load and store through `__noinline__` device functions (with pointer
    arguments, or a `__device__` variable's own getter and setter) and maps reading their
    input backwards (x[n - 1 - i]), all with the same numpy reference semantics.
    pointer tables the host fills (a host array of device pointers copied with cudaMemcpy),
    and inline PTX stores (`asm volatile("st.global.f32 ...")`). `generate(seed,
    features=Features.parse("-asm"))` or `scripts/fuzz.py --features -asm` turns one off;
    `Features.parse("none")` gives the programs of the generator before extras.py (see the
    Features docstring).
Launches form chains, forks (a value read by several launches), independent branches (fresh
inputs) and diamonds. Host loops: maps over slices (iteration t maps slice t of an input into
slice t of a new buffer: independent iterations), ping-pong (a step from one buffer into
another, optionally followed by an in-place activation, pointers swapped every iteration), in
place (one buffer
updated every iteration), slices (iteration t reads `d_x + t * n` and accumulates into one
buffer) and a two-level recurrence nest (h[l+1][t+1] = f(h[l+1][t], h[l][t+1]) through offsets
affine in l and t, the LSTM wavefront shape). Grids have partial last blocks wherever the block
size does not divide the extent. Every program stays under about 10^6 dynamic thread
instructions and every value under 10^6 in magnitude (no overflow, so a mismatch is a bug).

For fusion tests: `prog.write(dir)` gives the .cu file; `prog.outputs` the buffers copied back;
`prog.mismatches(initial, final, names=prog.outputs)` compares a run of the fused program with
the reference computed from the original run's `RunResult.initial` (both runs draw the same
inputs from the same seed; every buffer a launch reads is either an input, memset, or fully
written before it is read, so the original's `initial` is the right starting point);
`prog.calls()` lists the launch statements with their ops (grid, block, barriers, shared memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tests.randprog import kernels as K
from tests.randprog.access import bind_kernel
from tests.randprog.extras import DEFAULT, Extras, Features
from tests.randprog.kernels import Op
from tests.randprog.pointers import SetPtrs
from tests.randprog.program import (
    Buffer,
    Call,
    DevCopy,
    Global,
    HostLoop,
    Ptr,
    RandomProgram,
    Step,
    Sync,
)
from tests.randprog.render import Style, render, summarize

__all__ = ["DEFAULT", "Features", "build_program", "extras_chooser", "generate", "programs"]

T = TypeVar("T")

SCALARS = (0.5, 0.25, 0.75, 1.5, -0.5, -0.75, 2.0, 0.125, -1.25, 1.0)
COEFFS = (0.5, 0.25, 0.125, -0.25, 0.75, 1.0)
BLOCKS_1D = (32, 64, 96, 128, 160, 256)
BLOCKS_2D = ((8, 8), (16, 8), (16, 16), (32, 4), (32, 8), (8, 4), (4, 16))
MAX_ELEMS = 4096
BOUND_LIMIT = 1e6      # largest |value| a buffer may reach (static worst case)
BUDGET = 1_000_000     # estimated dynamic thread instructions per program


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...     # inclusive


def choice(ch: Chooser, options: Sequence[T]) -> T:
    return options[ch.integer(0, len(options) - 1)]


def chance(ch: Chooser, percent: int) -> bool:
    return ch.integer(0, 99) < percent


class SeedChooser:
    def __init__(self, seed: int, stream: int = 0):
        import random

        self.rng = random.Random(seed if not stream else seed * 1_000_003 + stream)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


@dataclass
class Var:
    """A pointer variable and what it holds now."""

    name: str
    rows: int
    cols: int
    bound: float          # static bound on |value|
    input: bool = False   # copied from the host
    memset: bool = False
    read_since_write: bool = False
    written: bool = False
    kind: str = "float"   # "float" (a buffer), "global" (`__device__` floats), "table"
    scalar: bool = False  # a global declared `float g` (1 x 1)
    host: bool = False    # a table the host fills

    @property
    def elems(self) -> int:
        return self.rows * self.cols

    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)


class Builder(Extras):
    def __init__(self, ch: Chooser, max_steps: int = 8, features: Features = DEFAULT,
                 xch: Chooser | None = None):
        self.init_extras(features, xch or ch)
        self.ch = ch
        self.max_steps = max_steps
        self.vars: dict[str, Var] = {}
        self.order: list[str] = []        # variables in allocation order
        self.recent: str | None = None    # the last variable written
        self.steps: list[Step] = []
        self.kernel_names: dict[str, str] = {}   # source with a placeholder name -> name
        self.kernel_sources: list[str] = []
        self.budget = BUDGET
        self.notes: list[str] = []
        self.uses_warp_sum = False

    # ---- variables ---------------------------------------------------------------------------
    def new_var(self, prefix: str, rows: int, cols: int, bound: float = 1.0,
                input: bool = False, memset: bool = False) -> Var:
        v = Var(f"d_{prefix}{len(self.order)}", rows, cols, bound, input=input, memset=memset)
        self.vars[v.name] = v
        self.order.append(v.name)
        return v

    def pick(self, ok, fresh: tuple[int, int] | None = None, recent_bias: int = 50,
             avoid: tuple[str, ...] = (), globals_ok: bool = False) -> Var:
        """A live variable satisfying `ok` (the last written one with some probability), or a new
        input of shape `fresh` when none does (or by chance: an independent branch).
        `__device__` variables are candidates only where `globals_ok` (outside host loops)."""
        names = self.order + (self.gorder if globals_ok else [])
        cands = [self.vars[n] for n in names if self.vars[n].kind != "table"
                 and (self.vars[n].written or self.vars[n].input)]
        cands = [v for v in cands if ok(v) and v.name not in avoid]
        if self.extras:   # a buffer a pointer table holds, or one whose result can go there
            pending = self.pending_shapes()
            held = [v for v in cands if self.targeted(v.name) or v.shape() in pending]
            if held and chance(self.ch, 45):
                return choice(self.ch, held)
        if self.recent in [v.name for v in cands] and chance(self.ch, recent_bias):
            return self.vars[self.recent]
        if cands and not chance(self.ch, 15):
            unread = [v for v in cands if not v.read_since_write]
            return choice(self.ch, unread if unread and chance(self.ch, 60) else cands)
        if fresh is None:
            fresh = choice(self.ch, cands).shape() if cands else (1, 64)
        return self.new_var("in", *fresh, input=True)

    def dims(self) -> tuple[int, int]:
        """A fresh 2-D shape (often that of a buffer a pointer table holds and nothing wrote
        yet, so that a later launch writes it)."""
        pending = self.pending_shapes()
        if pending and chance(self.ch, 50):
            return choice(self.ch, pending)
        rows = choice(self.ch, (1, 2, 3, 5, 8, 13, 16, 24, 31, 40))
        cols = self.ch.integer(4, max(4, min(96, MAX_ELEMS // rows)))
        return rows, cols

    # ---- kernels -----------------------------------------------------------------------------
    def kernel(self, op: Op | SetPtrs, binds: tuple = ()) -> str:
        if isinstance(op, K.Elementwise | SetPtrs):
            text = op.source("KERNEL", binds)
        else:
            text = op.source("KERNEL")
        if any(b.kind != "param" for b in binds):
            text = bind_kernel(text, binds)
        name = self.kernel_names.get(text)
        if name is None:
            name = f"k{len(self.kernel_names)}_{op.kind}"
            self.kernel_names[text] = name
            self.kernel_sources.append(text.replace("KERNEL", name, 1))
            if isinstance(op, K.Reduce) and not op.tree:
                self.uses_warp_sum = True
        return name

    def call(self, op: Op | SetPtrs, ptrs: list[Ptr]) -> Call:
        binds = tuple(self.bind(p) for p in ptrs)
        self.note_helpers(op, binds)
        return Call(self.kernel(op, binds), op, tuple(ptrs))

    # ---- ops ---------------------------------------------------------------------------------
    def elementwise(self, x: Var, other: Var | None, inplace: bool, fn: str | None = None,
                    bias: str = "") -> K.Elementwise:
        ch = self.ch
        if fn is None:
            fn = choice(ch, tuple(K.BINARY) if other is not None else tuple(K.UNARY))
        layout = choice(ch, ("1d", "1d", "stride", "2d"))
        if layout == "2d":
            bx, by = choice(ch, BLOCKS_2D)
            block = (bx, by, 1)
        else:
            block = (choice(ch, BLOCKS_1D), 1, 1)
        cap = ch.integer(1, max(1, K.cdiv(x.elems, block[0]))) if layout == "stride" else 0
        s = choice(ch, SCALARS)
        if fn == "clamp":
            s = abs(s)
        return K.Elementwise(fn, s, x.rows, x.cols, layout, block, inplace, bias, cap)

    def stencil(self, x: Var) -> K.Stencil:
        ch = self.ch
        if x.rows == 1:
            block = (choice(ch, BLOCKS_1D), 1, 1)
        else:
            bx, by = choice(ch, BLOCKS_2D)
            block = (bx, by, 1)
        return K.Stencil(x.rows, x.cols, choice(ch, COEFFS), choice(ch, COEFFS),
                         choice(ch, ("zero", "clamp")), block)

    def transpose(self, x: Var) -> K.Transpose:
        ch = self.ch
        if chance(ch, 35):
            bx, by = choice(ch, BLOCKS_2D)
            return K.Transpose(x.rows, x.cols, 0, 0, (bx, by, 1))
        tile = choice(ch, (8, 16, 32))
        return K.Transpose(x.rows, x.cols, tile, tile // choice(ch, (1, 2, 4)))

    def matmul(self, a: Var, n: int) -> K.Matmul:
        ch = self.ch
        if chance(ch, 30):
            bx, by = choice(ch, BLOCKS_2D)
            return K.Matmul(a.rows, n, a.cols, 0, (bx, by, 1))
        return K.Matmul(a.rows, n, a.cols, choice(ch, (4, 8, 16)))

    def reduce(self, x: Var) -> K.Reduce:
        ch = self.ch
        tree = chance(ch, 35)
        threads = choice(ch, (32, 64, 128, 256) if tree else (32, 64, 96, 128, 256))
        per_row = chance(ch, 60)
        return K.Reduce(x.rows, x.cols, per_row, threads, tree, tree and chance(ch, 50))

    # ---- steps -------------------------------------------------------------------------------
    def affordable(self, op: Op, trips: int = 1) -> bool:
        return op.cost * trips <= self.budget

    def emit(self, step: Step, cost: int) -> None:
        self.steps.append(step)
        self.budget -= cost

    def read(self, *vs: Var) -> None:
        for v in vs:
            v.read_since_write = True

    def wrote(self, v: Var, bound: float) -> None:
        v.bound, v.written, v.read_since_write = bound, True, False
        self.recent = v.name

    def dest(self, rows: int, cols: int, *operands: Var, globals_ok: bool = False) -> Var:
        """Where a result goes: a new temporary, or (sometimes) a dead variable of that shape
        that is none of the launch's operands (an in-place stencil would race); in programs
        with the constructs of extras.py, also a buffer a pointer table holds or a new
        `__device__` variable (where `globals_ok`)."""
        extra = self.extra_dest(rows, cols, operands, globals_ok)
        if extra is not None:
            return extra
        names = self.order + (self.gorder if globals_ok else [])
        dead = [self.vars[n] for n in names
                if self.vars[n].written and self.vars[n].read_since_write
                and self.vars[n].shape() == (rows, cols)
                and all(self.vars[n] is not o for o in operands)]
        if dead and chance(self.ch, 20):
            return choice(self.ch, dead)
        return self.new_var("t", rows, cols)

    def step_elementwise(self) -> bool:
        ch = self.ch
        g = self.extras
        x = self.pick(lambda v: v.elems <= MAX_ELEMS, fresh=self.dims(), globals_ok=g)
        other = None
        bias = ""
        if chance(ch, 50):
            bias = choice(ch, ("", "", "col", "row") + (("one", "one") if g else ()))
            shape = {"": (x.rows, x.cols), "col": (1, x.cols), "row": (x.rows, 1),
                     "one": (1, 1)}[bias]
            other = self.pick(lambda v: v.elems == shape[0] * shape[1] and v is not x,
                              fresh=shape, recent_bias=20, globals_ok=g)
        inplace = chance(ch, 25)
        op = self.decorate(self.elementwise(x, other, inplace, bias=bias))
        bound = op.bound([x.bound] + ([other.bound] if other else []))
        if bound > BOUND_LIMIT or not self.affordable(op):
            return False
        operands = (x, *([other] if other else []))
        y = x if inplace else self.dest(x.rows, x.cols, *operands, globals_ok=g)
        z = self.scalar_dest((*operands, y)) if op.side >= 0 else None
        ptrs = [self.ptr(x)] + ([self.ptr(other)] if other else [])
        ptrs += [] if inplace else [self.ptr(y)]
        ptrs += [self.ptr(z)] if z else []
        self.read(*operands)
        self.emit(self.call(op, ptrs), op.cost)
        self.wrote(y, bound)
        if z is not None:
            self.wrote(z, bound)
            self.recent = y.name
        return True

    def step_unary(self, make) -> bool:
        x = self.pick(lambda v: True, fresh=self.dims(), globals_ok=self.extras)
        op = make(x)
        out_rows, out_cols = getattr(op, "out_shape", (x.rows, x.cols))
        if isinstance(op, K.Transpose):
            out_rows, out_cols = x.cols, x.rows
        bound = op.bound([x.bound])
        if bound > BOUND_LIMIT or not self.affordable(op):
            return False
        y = self.dest(out_rows, out_cols, x, globals_ok=self.extras)
        self.read(x)
        self.emit(self.call(op, [self.ptr(x), self.ptr(y)]), op.cost)
        self.wrote(y, bound)
        return True

    def step_matmul(self) -> bool:
        ch = self.ch
        g = self.extras
        a = self.pick(lambda v: v.rows * v.cols <= 2048 and v.cols <= 64,
                      fresh=(ch.integer(2, 40), ch.integer(2, 40)), globals_ok=g)
        k = a.cols
        b = self.pick(lambda v: v.rows == k and v.cols <= 64 and v is not a,
                      fresh=(k, ch.integer(2, 48)), recent_bias=30, globals_ok=g)
        op = self.matmul(a, b.cols)
        bound = op.bound([a.bound, b.bound])
        if bound > BOUND_LIMIT or not self.affordable(op) or a.rows * b.cols > MAX_ELEMS:
            return False
        c = self.dest(a.rows, b.cols, a, b, globals_ok=g)
        self.read(a, b)
        self.emit(self.call(op, [self.ptr(a), self.ptr(b), self.ptr(c)]), op.cost)
        self.wrote(c, bound)
        return True

    def step_copy(self) -> bool:
        # only a launch's result: a buffer no launch receives holds bytes, not floats, in the
        # executor (its type comes from the kernel parameters), so a copied input would not be
        written = [self.vars[n] for n in self.order if self.vars[n].written]
        if not written:
            return False
        x = choice(self.ch, written)
        y = self.dest(x.rows, x.cols, x)
        self.read(x)
        self.emit(DevCopy(y.name, x.name), 0)
        self.wrote(y, x.bound)
        return True

    def step_loop(self) -> bool:
        kind = choice(self.ch, ("pingpong", "inplace", "slices", "recurrence", "map"))
        trips = self.ch.integer(2, 5)
        return getattr(self, f"loop_{kind}")(trips)

    def loop_pingpong(self, trips: int) -> bool:
        ch = self.ch
        x = self.pick(lambda v: True, fresh=self.dims())
        if chance(ch, 60):
            op: Op = self.stencil(x)
            others: list[Var] = []
        else:
            other = None
            if chance(ch, 50):
                other = self.pick(lambda v: v.shape() == (1, x.cols) and v is not x,
                                  fresh=(1, x.cols), recent_bias=0)
            op = self.elementwise(x, other, False, bias="col" if other else "")
            others = [other] if other else []
        post = None   # an in-place activation of the new iterate, in the same iteration
        if chance(ch, 40):
            post = self.elementwise(x, None, True, fn=choice(ch, ("tanh", "clamp", "relu")))
        bound, top = x.bound, 0.0
        for _ in range(trips):
            bound = op.bound([bound] + [o.bound for o in others])
            bound = post.bound([bound]) if post else bound
            top = max(top, bound)
        cost = (op.cost + (post.cost if post else 0)) * trips
        if top > BOUND_LIMIT or cost > self.budget:
            return False
        y = self.new_var("pp", x.rows, x.cols)
        ptrs = [Ptr(x.name)] + [Ptr(o.name) for o in others] + [Ptr(y.name)]
        body = [self.call(op, ptrs)] + ([self.call(post, [Ptr(y.name)])] if post else [])
        self.read(x, *others)
        self.emit(HostLoop(trips, tuple(body), (x.name, y.name)), cost)
        # after the loop, x names the newest iterate and y the one before
        if trips % 2:
            self.rename_targets(x.name, y.name)
        y.written, y.bound = True, top
        self.wrote(x, top)
        return True

    def loop_inplace(self, trips: int) -> bool:
        ch = self.ch
        x = self.pick(lambda v: True, fresh=self.dims())
        ops: list[Op] = []
        calls_ptrs: list[list[Ptr]] = []
        bound = x.bound
        used: list[Var] = []
        for _ in range(ch.integer(1, 2)):
            if chance(ch, 50):
                w = self.pick(lambda v: v.shape() == x.shape() and v is not x,
                              fresh=x.shape(), recent_bias=0)
                op = self.elementwise(x, w, True, fn=choice(ch, ("add", "max", "axpy", "sub")))
                calls_ptrs.append([Ptr(x.name), Ptr(w.name)])
                used.append(w)
            else:
                op = self.elementwise(x, None, True,
                                      fn=choice(ch, ("tanh", "clamp", "relu", "scale", "affine")))
                calls_ptrs.append([Ptr(x.name)])
            ops.append(op)
        for _ in range(trips):
            for op, ptrs in zip(ops, calls_ptrs, strict=True):
                extra = [self.vars[p.var].bound for p in ptrs[1:]]
                bound = op.bound([bound] + extra)
        cost = sum(op.cost for op in ops) * trips
        if bound > BOUND_LIMIT or cost > self.budget:
            return False
        body = tuple(self.call(op, p) for op, p in zip(ops, calls_ptrs, strict=True))
        self.read(x, *used)
        self.emit(HostLoop(trips, body), cost)
        self.wrote(x, bound)
        return True

    def loop_slices(self, trips: int) -> bool:
        ch = self.ch
        live = [self.vars[n] for n in self.order if self.vars[n].written
                and self.vars[n].elems * trips <= MAX_ELEMS]
        acc_live = choice(ch, live) if live and chance(ch, 50) else None
        if acc_live is not None:
            rows, cols = acc_live.shape()
        else:
            rows, cols = self.dims()
            rows = max(1, min(rows, MAX_ELEMS // (cols * trips)))
        xs = self.new_var("xs", rows * trips, cols, input=True)
        acc = acc_live or self.new_var("acc", rows, cols, memset=True)
        n = rows * cols
        plan: list[tuple[Op, list[Ptr]]] = []
        slice_var = Var(xs.name, rows, cols, 1.0)
        src = Ptr(xs.name, strides=(("t", n),))
        bound_in = 1.0
        tmp = None
        if chance(ch, 50):
            tmp = self.new_var("t", rows, cols)
            op = self.elementwise(slice_var, None, False)
            plan.append((op, [src, Ptr(tmp.name)]))
            bound_in = op.bound([1.0])
            src = Ptr(tmp.name)
        fn = choice(ch, ("add", "axpy", "max"))
        op = self.elementwise(Var(acc.name, rows, cols, 0.0), slice_var, True, fn=fn)
        plan.append((op, [Ptr(acc.name), src]))
        cost = sum(op.cost for op, _ in plan)
        bound = acc.bound if acc.written or acc.input else 0.0
        for _ in range(trips):
            bound = op.bound([bound, bound_in])
        if bound > BOUND_LIMIT or cost * trips > self.budget:
            return False
        xs.read_since_write = True
        if tmp is not None:
            tmp.written, tmp.bound, tmp.read_since_write = True, bound_in, True
        self.emit(HostLoop(trips, tuple(self.call(op, p) for op, p in plan)), cost * trips)
        self.wrote(acc, bound)
        return True

    def loop_map(self, trips: int) -> bool:
        """Iteration t maps slice t of an input into slice t of a new buffer (a kernel launched
        once per plane): the iterations are independent, so fusion unrolls the loop and makes
        its launches one repeated member."""
        rows, cols = self.dims()
        rows = max(1, min(rows, MAX_ELEMS // (cols * trips)))
        n = rows * cols
        xs = self.new_var("xs", rows * trips, cols, input=True)
        op = self.elementwise(Var(xs.name, rows, cols, 1.0), None, False)
        if op.cost * trips > self.budget:
            return False
        ys = self.new_var("ys", rows * trips, cols)
        xs.read_since_write = True
        self.emit(HostLoop(trips, (self.call(op, [Ptr(xs.name, strides=(("t", n),)),
                                                  Ptr(ys.name, strides=(("t", n),))]),)),
                  op.cost * trips)
        self.wrote(ys, op.bound([1.0]))
        return True

    def loop_recurrence(self, trips: int) -> bool:
        """A 2-D recurrence over a loop nest, as in a stacked RNN: cells h[l][t] of one buffer
        (layers l = 0..L, steps t = 0..T, each rows x cols), layer 0 and step 0 given, and
        h[l+1][t+1] = f(h[l+1][t], h[l][t+1]) for l < L, t < T, through pointer offsets affine
        in both loop variables."""
        ch = self.ch
        layers = ch.integer(1, 3)
        rows, cols = self.dims()
        cells = (layers + 1) * (trips + 1)
        rows = max(1, min(rows, MAX_ELEMS // (cols * cells)))
        if rows * cols * cells > MAX_ELEMS:
            return False
        cell = Var("cell", rows, cols, 1.0)
        fn = choice(ch, ("add", "max", "mul", "axpy", "sub"))
        op = self.elementwise(cell, cell, False, fn=fn)
        bound = [[1.0] * (trips + 1) for _ in range(layers + 1)]
        for li in range(layers):
            for t in range(trips):
                bound[li + 1][t + 1] = op.bound([bound[li + 1][t], bound[li][t + 1]])
        top = max(max(r) for r in bound)
        cost = op.cost * layers * trips
        if top > BOUND_LIMIT or cost > self.budget:
            return False
        h = self.new_var("h", rows * cells, cols, input=True)
        n, w = rows * cols, trips + 1
        strides = (("l", w * n), ("t", n))
        ptrs = [Ptr(h.name, w * n, strides), Ptr(h.name, n, strides),
                Ptr(h.name, (w + 1) * n, strides)]
        inner = HostLoop(trips, (self.call(op, ptrs),), var="t")
        self.read(h)
        self.emit(HostLoop(layers, (inner,), var="l"), cost)
        self.wrote(h, top)
        return True

    def step(self) -> bool:
        ch = self.ch
        kinds = ("map", "map", "map", "stencil", "stencil", "transpose", "matmul", "reduce",
                 "loop", "loop", "map", "copy") + (("setp", "setp") if self.can_setp() else ())
        kind = choice(ch, kinds)
        if kind == "setp":
            return self.step_setp()
        if kind == "map":
            return self.step_elementwise()
        if kind == "stencil":
            return self.step_unary(self.stencil)
        if kind == "transpose":
            return self.step_unary(self.transpose)
        if kind == "reduce":
            return self.step_unary(self.reduce)
        if kind == "matmul":
            return self.step_matmul()
        if kind == "copy":
            return self.step_copy()
        return self.step_loop()

    def launch_steps(self) -> int:
        return sum(isinstance(s, Call | HostLoop) and not isinstance(getattr(s, "op", None),
                                                                     SetPtrs)
                   for s in self.steps)

    def build(self) -> None:
        want = self.ch.integer(1, self.max_steps)
        tries = 0
        if self.can_setp() and chance(self.ch, 50):
            self.step_setp()          # addresses stored before anything is written (program A)
        while self.launch_steps() < want and tries < 4 * want:
            tries += 1
            mark, gmark = len(self.order), len(self.gorder)
            if self.steps and chance(self.ch, 10):
                self.steps.append(Sync())
            if not self.step():
                # drop the variables a rejected step created (nothing else changed yet)
                for name in self.order[mark:] + self.gorder[gmark:]:
                    del self.vars[name]
                del self.order[mark:]
                del self.gorder[gmark:]
        if not self.launch_steps():  # a budget that rejected everything: one small map
            x = self.new_var("in", 1, 64, input=True)
            op = K.Elementwise("scale", 0.5, 1, 64, "1d", (64, 1, 1))
            y = self.new_var("t", 1, 64)
            self.emit(self.call(op, [Ptr(x.name), Ptr(y.name)]), op.cost)
            self.wrote(y, 0.5)

    # ---- the program -------------------------------------------------------------------------
    def finish(self, seed: int | None) -> RandomProgram:
        ch = self.ch
        self.copy_out_globals()
        written = [self.vars[n] for n in self.order if self.vars[n].written]
        outs = [v.name for v in written if not v.read_since_write or chance(ch, 20)]
        if not outs:
            outs = [self.recent or written[-1].name]
        where = {n: n for n in self.order}   # pointer variable -> buffer after the swaps
        for s in self.steps:
            if isinstance(s, HostLoop) and s.swap and s.trips % 2:
                a, b = s.swap
                where[a], where[b] = where[b], where[a]
        out_buffers = {where[v] for v in outs}
        buffers = []
        for n in self.order:
            v = self.vars[n]
            role = ("output" if n in out_buffers else "input" if v.input or v.host
                    else "temp")
            buffers.append(Buffer(n, v.rows, v.cols, role, v.memset,
                                  "ptr" if v.kind == "table" else "float"))
        globals_ = [Global(n, self.vars[n].rows, self.vars[n].cols, self.vars[n].scalar)
                    for n in self.gorder]
        globals_ += [Global(n, 1, 1, True, "ptr") for n in self.gpointers]
        style = Style(check=chance(ch, 60), dim3_vars=chance(ch, 40))
        source = render(self, outs, style, seed)
        return RandomProgram(seed, source, tuple(buffers), tuple(self.steps),
                             tuple(self.kernel_names.values()),
                             tuple(b.name for b in buffers if b.role == "output"),
                             summarize(self.steps), tuple(globals_))


def build_program(ch: Chooser, seed: int | None = None, max_steps: int = 8,
                  features: Features = DEFAULT, xch: Chooser | None = None) -> RandomProgram:
    b = Builder(ch, max_steps, features, xch)
    b.build()
    return b.finish(seed)


def generate(seed: int, max_steps: int = 8, features: Features = DEFAULT) -> RandomProgram:
    """The program of `seed` (the same on every machine and Python version). Whether it uses
    the constructs of extras.py is drawn from a second stream of the seed, so a program that
    does not is the one the generator made before they existed."""
    return build_program(SeedChooser(seed), seed, max_steps, features, extras_chooser(seed))


def extras_chooser(seed: int) -> SeedChooser:
    """The stream that decides whether program `seed` uses the constructs of extras.py."""
    return SeedChooser(seed, stream=12)


class DrawChooser:
    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self.draw(st.integers(lo, hi))


def programs(max_steps: int = 8, features: Features = DEFAULT):
    """A hypothesis strategy of RandomPrograms (shrinks toward fewer, simpler launches)."""
    from hypothesis import strategies as st

    @st.composite
    def _programs(draw) -> RandomProgram:
        return build_program(DrawChooser(draw), None, max_steps, features)

    return _programs()
