"""Splitting shared temporary storage: removing the false dependences of a memory planner.

TVM's memory planner lets temporaries whose lifetimes do not overlap share one allocation (the
`d_storage<k>` buffers of kernels/tvm/*.cu). The sharing orders launches that are otherwise
independent: in BERT's QKV subgraph the K matmul overwrites `d_storage0` after the Q transpose
read it (a WAR) and after the Q matmul wrote it (a WAW), so the three (matmul, transpose) pairs
form one chain. Giving each value its own allocation removes those edges (6 launches -> 2 after
horizontal fusion), at the cost of device memory.

A temp buffer is split when every use of it is a top-level launch argument at a constant offset
(its Alloc and Free, top level and at offset 0, are allowed too). Its launches, in program
order, are cut into *versions*: runs of consecutive launches. Version 0 keeps the buffer; each
later version gets a buffer of its own. A cut before launch L is valid when the run it starts
reads nothing it did not write first: every byte a launch of the run may read (its read
footprint, an over-approximation) lies in the bytes that earlier launches of the run surely
wrote (their exact, non-atomic write footprints, which the analysis never over-approximates).
Then the run never sees a value written before it, no launch outside it sees a value written
inside it (the launches after it start runs of their own that read nothing from before them, and
nothing but launches uses a temp buffer), and moving the run to a fresh buffer changes nothing
the program computes. A launch that reads the buffer cannot start a run, and a run that reads
what was written before it is merged into the previous one (until every run is valid).

A new buffer covers only the bytes its run touches: `[base, end)` of the original, with `base`
rounded down to 256 bytes (cudaMalloc's alignment, so every pointer keeps its alignment) and the
launches' offsets rebased by `-base`. Statement ids are unchanged by the split (Alloc and Free
are not statements), so the records name statements of the original and the split program.
docs/fusion-storage.md has an example.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.analysis.host.model import (
    Alloc,
    Buffer,
    BufferArg,
    Copy,
    DevRef,
    Free,
    HostProgram,
    HostRef,
    Launch,
    Loop,
    Memset,
    Op,
    Rotating,
)
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.effects import READ, WRITE, Effect, Statement
from sirius.diagnostics import Location

ALIGN = 256  # bytes; cudaMalloc aligns at least this much
BUDGET = 30_000  # isl operations for one coverage question; beyond it: not covered


@dataclass(frozen=True, slots=True)
class Version:
    """One run of launches of a split buffer, and the buffer it lives in."""

    index: int
    buffer: str  # the original for version 0, `<orig>.v<index>` after
    statements: tuple[str, ...]  # launch statements it serves, in program order
    locs: tuple[Location | None, ...]  # their source locations
    bytes: tuple[int, int] | None  # [lo, hi) of the original that its launches touch
    base: int  # the byte of the original that byte 0 of `buffer` stands for (0 for version 0)
    size: int  # bytes of `buffer`


@dataclass(frozen=True, slots=True)
class BufferSplit:
    buffer: str
    versions: tuple[Version, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.buffer for v in self.versions)

    @property
    def extra_bytes(self) -> int:
        return sum(v.size for v in self.versions[1:])

    @property
    def bytes(self) -> tuple[int, int] | None:
        spans = [v.bytes for v in self.versions if v.bytes is not None]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def note(self) -> str:
        span = f" [{self.bytes[0]}, {self.bytes[1]})" if self.bytes else ""
        return (f"{self.buffer}{span}: {len(self.versions)} versions -> "
                f"{', '.join(self.names)}: +{self.extra_bytes} B")


@dataclass(frozen=True, slots=True)
class StorageSplit:
    host: HostProgram  # the split program, or the input itself when nothing split
    splits: tuple[BufferSplit, ...]
    extra_bytes: int
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Use:
    """A launch that receives the buffer, with what it does to the buffer's bytes."""

    statement: Statement
    reads: isl.Set | None  # bytes it may read; None: unknown (anything)
    writes: isl.Set | None  # bytes it surely writes; None: none
    box: tuple[int, int] | None  # [lo, hi) of every byte it may touch; None: none
    unbounded: bool  # its footprint has no bound: the box is unknown
    offsets: tuple[int, ...]  # byte offsets of its arguments into the buffer

    @property
    def id(self) -> str:
        return self.statement.id

    @property
    def what(self) -> str:
        loc = f" at {self.statement.loc}" if self.statement.loc else ""
        return f"{self.id} ({self.statement.label}{loc})"


def split_storage(host: HostProgram, uar: UAR,
                  buffers: Collection[str] | None = None) -> StorageSplit:
    """Give each version of every splittable temp buffer (or of those named in `buffers`) a
    buffer of its own. `uar` must be the UAR of `host`."""
    if uar.program is not host and uar.program != host:
        raise ValueError("split_storage: the UAR was built for another host program")
    refused = _refusals(host)
    index = _BufferIndex.of(_top_level_launches(host, uar), uar)
    notes: list[str] = []
    splits: list[BufferSplit] = []
    taken = {x.name for x in host.buffers}
    for b in host.buffers:
        if b.role != "temp" or (buffers is not None and b.name not in buffers):
            continue
        if b.name in refused:
            notes.append(f"{b.name}: not split: {refused[b.name]}")
            continue
        if b.name in uar.escaped:  # a copy would leave the stored addresses behind
            notes.append(f"{b.name}: not split: its address may be stored in device memory")
            continue
        uses, why = _uses(b, index)
        if uses is None:
            notes.append(f"{b.name}: not split: {why}")
            continue
        runs, why_not = _runs(uses)
        notes.extend(f"{b.name}: {w}" for w in why_not)
        if len(runs) < 2:
            reason = "" if why_not else \
                " (no launch after the first writes it, surely, without reading it)"
            notes.append(f"{b.name}: not split: one version{reason}")
            continue
        split = _versions(b, runs, taken)
        taken.update(split.names)
        splits.append(split)
        notes.append(split.note())
    if not splits:
        return StorageSplit(host, (), 0, tuple(notes))
    new_host = apply_splits(host, uar, splits)
    return StorageSplit(new_host, tuple(splits), sum(s.extra_bytes for s in splits),
                        tuple(notes))


# which buffers may be split ---------------------------------------------------------------------
def _refusals(host: HostProgram) -> dict[str, str]:
    """Buffer name -> why it must be left alone (a use that is not a top-level launch argument
    at a constant offset, or an Alloc/Free the split cannot duplicate)."""
    out: dict[str, str] = {}
    allocs: set[str] = set()
    frees: set[str] = set()

    def refuse(name: str, why: str, loc: Location | None) -> None:
        out.setdefault(name, why + (f" ({loc})" if loc else ""))

    def refs(addr: DevRef | Rotating) -> tuple[DevRef, ...]:
        return addr.choices if isinstance(addr, Rotating) else (addr,)

    def walk(ops: tuple[Op, ...], in_loop: bool) -> None:
        for op in ops:
            if isinstance(op, Loop):
                walk(op.body, True)
            elif isinstance(op, Alloc):
                if in_loop or op.buffer in allocs:
                    refuse(op.buffer, "allocated in a host loop or twice", op.loc)
                allocs.add(op.buffer)
            elif isinstance(op, Free):
                for r in refs(op.address):
                    if in_loop or isinstance(op.address, Rotating) or r.offset != Expr(0) \
                            or r.buffer in frees:
                        refuse(r.buffer, "freed in a host loop, twice or at an offset", op.loc)
                    frees.add(r.buffer)
            elif isinstance(op, Copy | Memset):
                sides = (op.dst, op.src) if isinstance(op, Copy) else (op.dst,)
                for side in sides:
                    if not isinstance(side, HostRef):
                        for r in refs(side):
                            refuse(r.buffer, f"used by a {type(op).__name__.lower()}", op.loc)
            elif isinstance(op, Launch):
                for a in op.args:
                    if not isinstance(a, BufferArg):
                        continue
                    if isinstance(a.address, Rotating):
                        for r in a.address.choices:
                            refuse(r.buffer, "a rotating launch argument", op.loc)
                    elif in_loop:
                        refuse(a.address.buffer, "passed to a launch in a host loop", op.loc)
                    elif not a.address.offset.is_const:
                        refuse(a.address.buffer, "a launch argument at a variable offset",
                               op.loc)

    walk(host.ops, False)
    for b in host.buffers:
        if b.role == "temp" and b.name not in allocs:
            refuse(b.name, "no allocation in the host model", b.loc)
    return out


def _top_level_launches(host: HostProgram, uar: UAR) -> dict[int, Statement]:
    """Position in host.ops -> statement, for the launches outside host loops."""
    out: dict[int, Statement] = {}
    for st in uar.statements:
        if st.kind != "launch" or st.loops:
            continue
        pos = st.position[0]
        if host.ops[pos] is not st.op and host.ops[pos] != st.op:
            raise ValueError(f"split_storage: statement {st.id} is not op {pos} of the program")
        out[pos] = st
    return out


@dataclass(frozen=True)
class _BufferIndex:
    """Who touches each buffer, gathered in one pass over the program (paper lstm_large: 103
    temp buffers against 4,090 launches; scanning every launch per buffer took 6 s)."""

    args: dict[str, list[tuple[Statement, tuple]]]  # buffer -> (launch, its offsets), in order
    effects: dict[str, dict[str, list[Effect]]]  # buffer -> statement id -> its effects there

    @staticmethod
    def of(launches: dict[int, Statement], uar: UAR) -> _BufferIndex:
        args: dict[str, list[tuple[Statement, tuple]]] = {}
        for pos in sorted(launches):
            st = launches[pos]
            launch = st.op
            assert isinstance(launch, Launch)
            offsets: dict[str, list] = {}
            for a in launch.args:
                if isinstance(a, BufferArg) and isinstance(a.address, DevRef):
                    offsets.setdefault(a.address.buffer, []).append(a.address.offset.const)
            for name, offs in offsets.items():
                args.setdefault(name, []).append((st, tuple(offs)))
        effects: dict[str, dict[str, list[Effect]]] = {}
        for sid, es in uar.effects.items():
            for e in es:
                effects.setdefault(e.buffer, {}).setdefault(sid, []).append(e)
        return _BufferIndex(args, effects)


def _uses(b: Buffer, index: _BufferIndex) -> tuple[list[_Use] | None, str]:
    uses: list[_Use] = []
    served: set[str] = set()
    touched = index.effects.get(b.name, {})
    for st, offsets in index.args.get(b.name, ()):
        served.add(st.id)
        effects = touched.get(st.id, [])
        uses.append(_Use(st, _may(e for e in effects if e.mode == READ),
                         _must(e for e in effects if e.mode == WRITE), _box(effects),
                         any(_unbounded(e) for e in effects), offsets))
    for sid in touched:
        if sid not in served:
            return None, f"{sid} touches it without receiving it"
    if not uses:
        return None, "no launch uses it"
    return uses, ""


def _bytes(e: Effect) -> isl.Set:
    s = e.relation.range()
    return islutil.project_out(s, islutil.param_names(s)).reset_tuple_id().coalesce()


def _unbounded(e: Effect) -> bool:
    return e.box is None and not e.relation.is_empty()


def _may(effects) -> isl.Set | None:
    out = isl.Set("{ [x] : false }")
    for e in effects:
        if _unbounded(e):
            return None  # anything
        out = out.union(_bytes(e))
    return out.coalesce()


def _must(effects) -> isl.Set | None:
    out = None
    for e in effects:
        if not e.exact or e.atomic or islutil.param_names(e.relation):
            continue
        s = _bytes(e)
        out = s if out is None else out.union(s)
    return None if out is None or out.is_empty() else out.coalesce()


def _box(effects: list[Effect]) -> tuple[int, int] | None:
    boxes = [e.box for e in effects if e.box is not None]
    if not boxes:
        return None
    return min(x[0] for x in boxes), max(x[1] for x in boxes) + 1


# versions ---------------------------------------------------------------------------------------
def _starts_run(u: _Use) -> bool:
    return u.writes is not None and u.reads is not None and u.reads.is_empty()


def _exposed(run: list[_Use]) -> _Use | None:
    """The first launch of a run (after its first) that may read a byte no earlier launch of
    the run surely wrote; None when there is none."""
    covered = run[0].writes
    for u in run[1:]:
        if u.reads is None:
            return u
        if not u.reads.is_empty():
            if covered is None or not _covers(str(u.reads), str(covered)):
                return u
        if u.writes is not None:
            covered = u.writes if covered is None else covered.union(u.writes).coalesce()
    return None


@functools.lru_cache(maxsize=4096)
def _covers(reads: str, covered: str) -> bool:
    """Whether the bytes `covered` holds every byte of `reads` (sets as isl text: the layers
    of a model ask the same question of each layer's buffers; paper bert_base's 12 took 9 s
    each)."""
    r, c = isl.Set(reads), isl.Set(covered)
    return (islutil.bounded(BUDGET, lambda: r.is_subset(c), False)
            or islutil.covers_by_count(r, c, BUDGET))


def _runs(uses: list[_Use]) -> tuple[list[list[_Use]], list[str]]:
    """Cut `uses` into runs: run 0 from the first launch, a new run at each launch that writes
    without reading, merged back until no later run reads what was written before it."""
    runs: list[list[_Use]] = []
    for i, u in enumerate(uses):
        if i and _starts_run(u):
            runs.append([u])
        elif runs:
            runs[-1].append(u)
        else:
            runs.append([u])
    why: list[str] = []
    changed = True
    while changed:
        changed = False
        for k in range(len(runs) - 1, 0, -1):
            bad = _exposed(runs[k])
            if bad is not None:
                why.append(f"no new version at {runs[k][0].what}: {bad.what} may read bytes "
                           "written before it")
                runs[k - 1].extend(runs.pop(k))
                changed = True
    # A run that touches no byte an earlier launch touched has no false dependence to remove:
    # it stays (merging keeps a run valid: its reads stay covered by its own writes).
    k = 1
    while k < len(runs):
        if not _overlaps(runs[k], [u for run in runs[:k] for u in run]):
            why.append(f"no new version at {runs[k][0].what}: it touches no byte an earlier "
                       "launch touched (no false dependence)")
            runs[k - 1].extend(runs.pop(k))
        else:
            k += 1
    return runs, why


def _overlaps(run: list[_Use], before: list[_Use]) -> bool:
    if any(u.unbounded for u in run + before):
        return True
    return any(a.box[0] < b.box[1] and b.box[0] < a.box[1]
               for a in run if a.box is not None for b in before if b.box is not None)


def _versions(b: Buffer, runs: list[list[_Use]], taken: set[str]) -> BufferSplit:
    out = []
    for k, run in enumerate(runs):
        boxes = [u.box for u in run if u.box is not None]
        span = None if not boxes or any(u.unbounded for u in run) else \
            (min(x[0] for x in boxes), max(x[1] for x in boxes))
        name, base, size = b.name, 0, b.bytes
        if k:
            name = f"{b.name}.v{k}"
            while name in taken:
                name += "_"
            if span is not None:
                offsets = [o for u in run for o in u.offsets]
                base = max(0, min(span[0], *offsets)) // ALIGN * ALIGN
                size = max(span[1], *offsets) - base
        out.append(Version(k, name, tuple(u.id for u in run),
                           tuple(u.statement.loc for u in run), span, base, size))
    return BufferSplit(b.name, tuple(out))


# the new program --------------------------------------------------------------------------------
def apply_splits(host: HostProgram, uar: UAR, splits: Sequence[BufferSplit]) -> HostProgram:
    """`host` with the versions k > 0 of `splits` moved to buffers of their own: their
    launches' arguments re-pointed (offset - base), an Alloc after the original's Alloc and a
    Free after its Free. Nothing is checked: `split_storage` decides what is safe (the tests
    build unsafe splits with this to see the executor catch them)."""
    position = {st.id: pos for pos, st in _top_level_launches(host, uar).items()}
    # index in host.ops -> (original buffer -> (new buffer, base))
    moved: dict[int, dict[str, tuple[str, int]]] = {}
    for s in splits:
        for v in s.versions[1:]:
            for sid in v.statements:
                moved.setdefault(position[sid], {})[s.buffer] = (v.buffer, v.base)
    by_buffer = {s.buffer: s for s in splits}
    ops: list[Op] = []
    for i, op in enumerate(host.ops):
        if i in moved:
            assert isinstance(op, Launch)
            ops.append(_renamed(op, moved[i]))
            continue
        ops.append(op)
        if isinstance(op, Alloc) and op.buffer in by_buffer:
            ops.extend(Alloc(v.buffer, v.size, op.loc)
                       for v in by_buffer[op.buffer].versions[1:])
        elif isinstance(op, Free) and isinstance(op.address, DevRef) \
                and op.address.buffer in by_buffer:
            ops.extend(Free(DevRef(v.buffer), op.loc)
                       for v in by_buffer[op.address.buffer].versions[1:])
    buffers = list(host.buffers)
    next_id = max((x.id for x in buffers), default=-1) + 1
    for s in splits:
        orig = host.buffer(s.buffer)
        for v in s.versions[1:]:
            buffers.append(Buffer(next_id, v.buffer, v.size, "temp", orig.loc))
            next_id += 1
    return dataclasses.replace(host, buffers=tuple(buffers), ops=tuple(ops))


def _renamed(launch: Launch, moves: dict[str, tuple[str, int]]) -> Launch:
    args = []
    for a in launch.args:
        if isinstance(a, BufferArg) and isinstance(a.address, DevRef) \
                and a.address.buffer in moves:
            name, base = moves[a.address.buffer]
            a = BufferArg(DevRef(name, a.address.offset - base))
        args.append(a)
    return dataclasses.replace(launch, args=tuple(args))
