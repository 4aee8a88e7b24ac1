"""What the code generator is asked to build, and what it reports back (all frozen values).

A `FusedKernelSpec` names a new kernel, its arrangement and its members. A `Member` is one
original launch: the kernel, the launch shape it had, how its parameters map onto the fused
kernel's parameters, whether a block barrier must precede it (vertical), and a `ThreadMap`
saying which fused-kernel thread runs which of its (block, thread) instances:

- `block` (the default): member block = the fused block's linear id (vertical) or its offset in
  the member's block range (horizontal), delinearized in the member's grid; member thread = the
  fused thread's linear id, delinearized in the member's block. Blocks past the member's grid
  and threads past its block skip it. Works with barriers (counted ones when threads skip),
  shared memory and warp operations (warps coincide).
- `global`: the member's instances are aligned on the global linear thread id
  (`block * fused_threads + thread`), the paper's "reshape the iteration domain" for launches of
  different shapes. No barriers, shared memory or warp operations (a member block is spread
  over fused blocks).
- `custom`: six quasi-affine `Expr`s (bx, by, bz, tx, ty, tz of the member) over the variables
  `block`, `thread` (linear ids, `block` relative to the member's range), `bx by bz tx ty tz`
  (the fused kernel's own ids). This is what map re-indexing produces (evaluate a consumer in
  its producer's threads); instances outside the member's grid/block skip it. Same restrictions
  as `global` unless every fused thread of a running block runs it.
- `custom` with `reps`: each fused thread runs several member instances, one after the other,
  the k-th given by the six Exprs `reps[k]` (`ids` is `reps[0]`). This is what permutation
  re-indexing produces (a transpose evaluated in the threads of the matmul that wrote its
  input: each producer thread runs the consumer instances that read the elements it wrote).
  Same restrictions as `custom`.

`member_ids` gives the six expressions of any map, so a planner can build a custom map from a
producer's ids (`e = (ids.by*16 + ids.ty)*64 + ids.bx*16 + ids.tx`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import Launch
from sirius.diagnostics import SiriusError

Dim3 = tuple[int, int, int]


class CodegenError(SiriusError):
    """A fused kernel cannot be generated as specified (the message names the fused kernel, the
    member and the reason)."""


IDS = ("bx", "by", "bz", "tx", "ty", "tz")
THREAD_VARS = frozenset({"thread", "tx", "ty", "tz"})
BLOCK_VARS = frozenset({"block", "bx", "by", "bz"})


@dataclass(frozen=True, slots=True)
class ThreadMap:
    kind: str = "block"  # block | global | custom
    ids: tuple[Expr, ...] = ()  # custom: (bx, by, bz, tx, ty, tz) of the member
    reps: tuple[tuple[Expr, ...], ...] = ()  # custom, several instances per thread: each's ids

    @staticmethod
    def multi(reps) -> ThreadMap:
        """A custom map that runs `len(reps)` instances per fused thread, in order."""
        rows = tuple(tuple(Expr.of(e) for e in r) for r in reps)
        if not rows:
            raise ValueError("a multi-instance map needs at least one instance")
        return ThreadMap("custom", rows[0], rows if len(rows) > 1 else ())

    @property
    def instances(self) -> tuple[tuple[Expr, ...], ...]:
        """The id tuples of the instances one fused thread runs (custom maps)."""
        return self.reps or (self.ids,)

    @staticmethod
    def custom(bx: Expr | int = 0, by: Expr | int = 0, bz: Expr | int = 0, tx: Expr | int = 0,
               ty: Expr | int = 0, tz: Expr | int = 0) -> ThreadMap:
        return ThreadMap("custom", tuple(Expr.of(e) for e in (bx, by, bz, tx, ty, tz)))

    def __post_init__(self) -> None:
        if self.kind not in ("block", "global", "custom"):
            raise ValueError(f"unknown thread map {self.kind!r} (block, global or custom)")
        if self.kind == "custom":
            if len(self.ids) != 6 or any(len(r) != 6 for r in self.reps):
                raise ValueError("a custom thread map gives six expressions (bx..tz)")
            if self.reps and self.reps[0] != self.ids:
                raise ValueError("a multi-instance map's ids are its first instance's")
            bad = set().union(*(e.variables() for r in self.instances for e in r)) \
                - THREAD_VARS - BLOCK_VARS
            if bad:
                raise ValueError(f"a custom thread map may use block, thread, bx..tz; not "
                                 f"{', '.join(sorted(bad))}")

    def to_json(self) -> dict | str:
        if self.kind != "custom":
            return self.kind
        if self.reps:
            return {"custom": {n: e.to_json() for n, e in zip(IDS, self.ids, strict=True)},
                    "reps": [{n: e.to_json() for n, e in zip(IDS, r, strict=True)}
                             for r in self.reps]}
        return {"custom": {n: e.to_json() for n, e in zip(IDS, self.ids, strict=True)}}


BLOCK = ThreadMap("block")
GLOBAL = ThreadMap("global")


@dataclass(frozen=True, slots=True)
class Member:
    kernel: str  # the kernel's (mangled) IR name
    grid: Dim3
    block: Dim3
    smem: int = 0  # dynamic shared memory of the original launch, bytes
    param_map: tuple[int, ...] | None = None  # member param i -> fused param index
    barrier_before: bool = False  # vertical: a block barrier before this member
    mapping: ThreadMap = BLOCK
    blocks: int | None = None  # fused blocks this member needs (custom maps; else derived)
    # horizontal, block map: the member stands for `repeat` launches of its kernel, one after
    # another in the block range; launch k gets parameter i plus k * strides[i] (bytes for a
    # pointer, the value for an integer; 0: the same argument), as a host loop's iterations do
    repeat: int = 1
    strides: tuple[int, ...] = ()

    @property
    def threads(self) -> int:
        return prod(self.block)

    def blocks_needed(self, fused_threads: int) -> int | None:
        if self.blocks is not None:
            return self.blocks
        if self.mapping.kind == "block":
            return prod(self.grid) * self.repeat
        if self.mapping.kind == "global":
            return -(-prod(self.grid) * self.threads // fused_threads)
        return None

    def to_json(self) -> dict:
        out: dict = {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block)}
        if self.smem:
            out["smem"] = self.smem
        if self.param_map is not None:
            out["params"] = list(self.param_map)
        if self.barrier_before:
            out["barrier_before"] = True
        if self.mapping.kind != "block":
            out["map"] = self.mapping.to_json()
        if self.blocks is not None:
            out["blocks"] = self.blocks
        if self.repeat != 1:
            out["repeat"] = self.repeat
            out["strides"] = list(self.strides)
        return out

    @staticmethod
    def from_json(d: dict) -> Member:
        m = d.get("map", "block")
        if isinstance(m, dict) and "reps" in m:
            mapping = ThreadMap.multi([tuple(_parse_expr(r[n]) for n in IDS) for r in m["reps"]])
        elif isinstance(m, dict):
            mapping = ThreadMap.custom(**{k: _parse_expr(v) for k, v in m["custom"].items()})
        else:
            mapping = ThreadMap(m)
        return Member(d["kernel"], _dim3(d["grid"]), _dim3(d["block"]), int(d.get("smem", 0)),
                      tuple(d["params"]) if "params" in d else None,
                      bool(d.get("barrier_before", False)), mapping, d.get("blocks"),
                      int(d.get("repeat", 1)), tuple(int(x) for x in d.get("strides", ())))


# vertical: every member in every fused thread; horizontal: each member in its own blocks;
# grid: a megakernel, every member over all blocks (a block-stride loop), grid-wide barriers
# between the segments that depend on each other (launched cooperatively)
ARRANGEMENTS = ("vertical", "horizontal", "grid")
# a megakernel's grid-wide barrier and its counter (codegen/grid.py writes them; the CPU
# executor's rewrite recognises the barrier)
GRID_SYNC = "sirius_grid_sync"
GRID_SYNC_COUNTER = "sirius_grid_sync_counter"
# the `counters` megakernel's helpers (codegen/grid.py): a block marks a segment done, waits for
# the producer blocks its wait-table entries name; and the suffixes of the kernel's flag array
# array, wait table and its per-block index (module globals `<kernel>_mkflags`, `<kernel>_mkwaits`,
# `<kernel>_mkwaitidx`)
MK_SIGNAL = "sirius_mk_signal"
MK_WAIT = "sirius_mk_wait"
MK_HELPERS = (MK_SIGNAL, MK_WAIT)
MK_FLAGS, MK_WAITS, MK_WAITIDX = "_mkflags", "_mkwaits", "_mkwaitidx"


@dataclass(frozen=True, slots=True)
class Wait:
    """A `counters` megakernel's wait: in segment `segment`, the blocks `blocks` (physical
    block ids, inclusive) wait, before they start it, until the blocks `producers` (inclusive)
    have finished segment `after` of this launch; with `lag` 1 (a device loop), segment
    `after` of the iteration before this one (and so of every earlier one)."""
    segment: int
    blocks: tuple[int, int]
    after: int
    producers: tuple[int, int]
    lag: int = 0

    def to_json(self) -> list[int]:
        return [self.segment, *self.blocks, self.after, *self.producers,
                *([self.lag] if self.lag else [])]

    @staticmethod
    def from_json(d: list[int]) -> Wait:
        k, blo, bhi, j, plo, phi, *lag = (int(x) for x in d)
        return Wait(k, (blo, bhi), j, (plo, phi), lag[0] if lag else 0)


@dataclass(frozen=True, slots=True)
class DeviceLoop:
    """A megakernel whose host loop (or perfect loop nest) moved inside it: its segments (with
    their waits, in the `counters` variant) run `trips` times, a grid barrier between
    iterations. A nest runs as one loop over all its iterations in the host's order: `levels`
    are its trip counts, outermost first (empty for one loop), `trips` their product, and
    iteration k is iteration (k // d) % levels[l] of level l, d the product of the levels
    inside l. In iteration k the member parameter (member index, parameter index) of each
    `strides` entry (member, parameter, stride, level) receives its launch argument plus the
    level's iteration times the stride (bytes past a pointer, added to an integer). Every
    other argument is the same in each iteration."""

    trips: int
    strides: tuple[tuple[int, int, int, int], ...] = ()  # (member, parameter, stride, level)
    levels: tuple[int, ...] = ()

    def nest(self) -> tuple[int, ...]:
        """The trip count of each level, outermost first."""
        return self.levels or (self.trips,)

    def steps(self, member: int, param: int) -> list[tuple[int, int, int]]:
        """(divisor, trips, stride) for each level that steps the parameter: the level's
        iteration is (k // divisor) % trips in iteration k."""
        nest = self.nest()
        return [(prod(nest[lv + 1:]), nest[lv], s) for m, j, s, lv in self.strides
                if (m, j) == (member, param)]

    def to_json(self) -> dict:
        out: dict = {"trips": self.trips, "strides": [list(x) for x in self.strides]}
        if self.levels:
            out["levels"] = list(self.levels)
        return out

    @staticmethod
    def from_json(d: dict) -> DeviceLoop:
        return DeviceLoop(int(d["trips"]), tuple((int(x[0]), int(x[1]), int(x[2]),
                                                  int(x[3]) if len(x) > 3 else 0)
                                                 for x in d.get("strides", ())),
                          tuple(int(t) for t in d.get("levels", ())))


@dataclass(frozen=True, slots=True)
class FusedKernelSpec:
    name: str
    arrangement: str  # vertical | horizontal
    members: tuple[Member, ...]
    block: Dim3 | None = None  # default: (largest member block, 1, 1), or the members' one
    # block shape in a horizontal kernel whose members share it (codegen.assemble)
    grid: Dim3 | None = None  # default: what the members need, 1-D
    share_smem: bool | None = None  # overlay members' shared memory (default: horizontal)
    # grid (a megakernel): the members that start a segment after a grid-wide barrier; the
    # members of one segment are independent and run one after another in each block, a block
    # barrier between them
    grid_sync_before: tuple[int, ...] = ()
    # grid, `counters` variant: the waits that replace the grid barriers (None: grid barriers);
    # blocks wait only for the producer blocks whose work theirs depends on
    waits: tuple[Wait, ...] | None = None
    # grid: the host loop around the megakernel's launch, run on the device instead
    device_loop: DeviceLoop | None = None

    def __post_init__(self) -> None:
        if self.arrangement not in ARRANGEMENTS:
            raise ValueError(f"unknown arrangement {self.arrangement!r} "
                             f"({', '.join(ARRANGEMENTS)})")
        if not self.members:
            raise ValueError(f"fused kernel {self.name} has no members")
        if self.grid_sync_before and self.arrangement != "grid":
            raise ValueError("grid barriers (grid_sync_before) are for the grid arrangement")
        if any(not 0 < i < len(self.members) for i in self.grid_sync_before):
            raise ValueError(f"grid_sync_before {self.grid_sync_before}: member indices "
                             f"1..{len(self.members) - 1}")
        if self.arrangement == "grid" and self.grid is None:
            raise ValueError("a grid megakernel needs its grid (the blocks that can be "
                             "co-resident)")
        if self.device_loop is not None:
            if self.arrangement != "grid":
                raise ValueError("a device loop is for the grid arrangement")
            dl = self.device_loop
            if dl.trips < 1 or prod(dl.nest()) != dl.trips or any(
                    not (0 <= m < len(self.members) and 0 <= lv < len(dl.nest()))
                    for m, _, _, lv in dl.strides):
                raise ValueError(f"device loop {dl.to_json()}: trips >= 1, the product of "
                                 f"the levels, members 0..{len(self.members) - 1}, levels "
                                 f"0..{len(dl.nest()) - 1}")
        if self.waits is not None:
            if self.arrangement != "grid":
                raise ValueError("waits are for the grid arrangement")
            nseg, g = len(self.segments()), self.grid[0] if self.grid else 0
            for w in self.waits:  # deadlock freedom: only earlier work, real blocks
                earlier = 0 <= w.after < w.segment < nseg if w.lag == 0 else \
                    w.lag == 1 and self.device_loop is not None and \
                    0 <= w.after < nseg and 0 <= w.segment < nseg
                if not (earlier and 0 <= w.blocks[0] <= w.blocks[1] < g
                        and 0 <= w.producers[0] <= w.producers[1] < g):
                    raise ValueError(f"wait {w.to_json()}: a block of segment k waits only "
                                     f"for blocks 0..{g - 1} of an earlier segment "
                                     f"(0 <= after < segment < {nseg}), or, in a device loop "
                                     "(lag 1), of any segment of the iteration before")

    def segments(self) -> list[list[int]]:
        """grid: the member indices of each segment, in order."""
        cuts = sorted(set(self.grid_sync_before))
        bounds = [0, *cuts, len(self.members)]
        return [list(range(a, b)) for a, b in zip(bounds, bounds[1:], strict=False)]

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "arrangement": self.arrangement,
                     "members": [m.to_json() for m in self.members]}
        if self.block is not None:
            out["block"] = list(self.block)
        if self.grid is not None:
            out["grid"] = list(self.grid)
        if self.share_smem is not None:
            out["share_smem"] = self.share_smem
        if self.grid_sync_before:
            out["grid_sync_before"] = list(self.grid_sync_before)
        if self.waits is not None:
            out["waits"] = [w.to_json() for w in self.waits]
        if self.device_loop is not None:
            out["device_loop"] = self.device_loop.to_json()
        return out

    @staticmethod
    def from_json(d: dict) -> FusedKernelSpec:
        return FusedKernelSpec(d["name"], d["arrangement"],
                               tuple(Member.from_json(m) for m in d["members"]),
                               _dim3(d["block"]) if "block" in d else None,
                               _dim3(d["grid"]) if "grid" in d else None, d.get("share_smem"),
                               tuple(int(i) for i in d.get("grid_sync_before", ())),
                               tuple(Wait.from_json(w) for w in d["waits"])
                               if "waits" in d else None,
                               DeviceLoop.from_json(d["device_loop"])
                               if "device_loop" in d else None)


@dataclass(frozen=True, slots=True)
class FusedParam:
    name: str
    type: str  # LLVM type as the fused kernel declares it (with byval(...) when by value)
    uses: tuple[tuple[int, int], ...]  # (member index, member param index)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a member landed: its fused block range, its guard, its barrier handling."""

    member: int
    fragment: str
    first_block: int
    blocks: int  # length of the block range (vertical: the whole grid)
    threads: int | None  # fused threads per block running it (None: depends on the block)
    barrier_id: int | None  # the counted barrier id its barriers became, when it has one
    smem_offset: int  # its static shared arrays start here in the fused buffer
    dyn_offset: int  # its dynamic shared memory starts here


@dataclass(frozen=True, slots=True)
class FusedKernel:
    name: str
    arrangement: str
    grid: Dim3
    block: Dim3
    smem: int  # dynamic shared memory to launch with, bytes
    static_smem: int  # bytes of the fused static shared buffer
    params: tuple[FusedParam, ...]
    placements: tuple[Placement, ...]
    spec: FusedKernelSpec = field(repr=False)

    def launch(self, launches: Sequence[Launch], loc=None) -> Launch:
        """The host `Launch` of this kernel that replaces `launches` (one per member, in member
        order): each fused argument is its members' argument, which must agree."""
        if len(launches) != len(self.spec.members):
            raise ValueError(f"{self.name} has {len(self.spec.members)} members, "
                             f"{len(launches)} launches given")
        args = []
        for p in self.params:
            vals = [launches[m].args[i] for m, i in p.uses]
            if any(v != vals[0] for v in vals[1:]):
                raise ValueError(f"fused parameter {p.name} of {self.name} receives different "
                                 f"values: {vals}")
            args.append(vals[0])
        first = launches[0]
        g, b = self.grid, self.block
        return Launch(self.name, self.name, (Expr(g[0]), Expr(g[1]), Expr(g[2])),
                      (Expr(b[0]), Expr(b[1]), Expr(b[2])), Expr(self.smem), tuple(args),
                      loc if loc is not None else first.loc,
                      prepare=all(x.prepare for x in launches))

    def to_json(self) -> dict:
        return {"name": self.name, "arrangement": self.arrangement, "grid": list(self.grid),
                "block": list(self.block), "smem": self.smem, "static_smem": self.static_smem,
                "params": [{"name": p.name, "type": p.type, "uses": [list(u) for u in p.uses]}
                           for p in self.params],
                "members": [{"kernel": m.kernel, "fragment": pl.fragment,
                             "first_block": pl.first_block, "blocks": pl.blocks,
                             "threads": pl.threads, "barrier_id": pl.barrier_id}
                            for m, pl in zip(self.spec.members, self.placements, strict=True)]}


@dataclass(frozen=True, slots=True)
class FusedModule:
    text: str  # the whole device module: original kernels + fused kernels, optimized
    kernels: tuple[FusedKernel, ...]
    unoptimized: str = field(default="", repr=False)  # before the O3 pipeline

    def kernel(self, name: str) -> FusedKernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


def _dim3(v: Sequence[int]) -> Dim3:
    t = tuple(int(x) for x in v) + (1, 1, 1)
    return (t[0], t[1], t[2])


def _parse_expr(v: int | str) -> Expr:
    """An Expr from its printed form (`4*thread + 16`, `floor((block)/2)`, `(thread mod 8)`)."""
    if isinstance(v, int):
        return Expr(v)
    return _ExprParser(v).parse()


class _ExprParser:
    def __init__(self, text: str):
        import re

        self.toks = re.findall(r"\d+|[A-Za-z_]\w*|[-+*/()]", text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        t = self.toks[self.i]
        self.i += 1
        return t

    def parse(self) -> Expr:
        e = self.sum()
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()!r} in expression")
        return e

    def sum(self) -> Expr:
        e = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            t = self.term()
            e = e + t if op == "+" else e - t
        return e

    def term(self) -> Expr:
        e = self.factor()
        while self.peek() in ("*", "mod"):
            op = self.take()
            f = self.factor()
            if op == "mod":
                e = e.mod(f.const)
            else:
                r = e.mul(f)
                if r is None:
                    raise ValueError("product of two non-constant expressions")
                e = r
        return e

    def factor(self) -> Expr:
        t = self.take()
        if t == "-":
            return -self.factor()
        if t == "(":
            e = self.sum()
            self.take()
            return e
        if t == "floor":
            self.take()  # (
            num = self.sum()
            if self.peek() == "/":
                self.take()
                d = self.factor()
                self.take()  # )
                return num.floordiv(d.const)
            self.take()
            return num
        if t.isdigit():
            return Expr(int(t))
        return Expr.var(t)
