"""Points-to sets of a whole program: which allocations' addresses may sit in which memory.

The paper's section 3.5 (inclusion-based, Andersen style), over whole allocations. Objects are
host buffers (by name), module globals (`@name`), shared arrays (`%shared:<IR name>`) and
thread-private memory (`%local:<IR name>`); `*` stands for every allocation and every global.
`pts[o]` holds the objects whose address may be stored somewhere in `o`; `anywhere` those stored
where sirius cannot tell (they may be read back from any memory). The constraints:

- every launch's pointer flows (kernel/flows.py): a pointer based on `value` stored into memory
  based on `container`, both resolved against the launch's arguments;
- a host-to-device copy whose host bytes hold device addresses (`Copy.pointers`, recorded by
  the host model) puts those allocations into its destination; one whose host bytes were copied
  back from the device (`Copy.via`) carries what those buffers held; a device-to-device copy
  carries what its source held;
- a `__device__` pointer variable's initializer puts the globals it names into the variable.

A pointer loaded from memory based on `c` points into `pts[c]` (and `anywhere`); the solution is
the least fixpoint of the constraints, found by iteration (sets only grow, objects are finite).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from sirius.analysis.host.model import BufferArg, Copy, DevRef, HostProgram, Launch, Rotating
from sirius.analysis.irtypes import TypeParseError, type_size
from sirius.analysis.irview import ModuleView
from sirius.analysis.kernel.access import KernelSummary
from sirius.analysis.kernel.pieces import Base, space_of_global

EVERY = "*"
_REF_RE = re.compile(r'@([-\w.$]+|"[^"]+")')


def module_globals(view: ModuleView) -> dict[str, int]:
    """`@name` -> bytes for every global and constant variable of the device module (shared
    arrays and LLVM's own globals excluded); a size sirius cannot lay out is 0 (unbounded)."""
    out: dict[str, int] = {}
    for name, g in view.globals.items():
        if name.startswith("llvm.") or name in view.functions:
            continue
        if space_of_global(view.global_texts.get(name, "")) not in ("global", "const"):
            continue
        try:
            out["@" + name] = type_size(g.type, view.struct_bodies)
        except TypeParseError:
            out["@" + name] = 0
    return out


def initializer_refs(view: ModuleView, names: Iterable[str]) -> dict[str, set[str]]:
    """`@name` -> the globals whose addresses its initializer holds."""
    out: dict[str, set[str]] = {}
    for g in names:
        text = view.global_texts.get(g[1:], "").split(" = ", 1)[-1]
        refs = {"@" + r.strip('"') for r in _REF_RE.findall(text.split(", !dbg", 1)[0])}
        refs = {r for r in refs if r != g and r[1:] not in view.functions}
        if refs:
            out[g] = refs
    return out


def _addr_buffers(a: DevRef | Rotating) -> set[str]:
    return {a.buffer} if isinstance(a, DevRef) else {c.buffer for c in a.choices}


class PointsTo:
    """The solved points-to sets of one program (solved on first use)."""

    def __init__(self, program: HostProgram,
                 launches: Callable[[], list[tuple[Launch, KernelSummary]]],
                 globals_: dict[str, int], inits: dict[str, set[str]]):
        self.program = program
        self.launches = launches
        self.globals = globals_
        self.inits = inits
        self.pts: dict[str, set[str]] = {}
        self.anywhere: set[str] = set()
        self._solved = False

    # resolution ----------------------------------------------------------------------------
    def objects(self, base: Base, launch: Launch) -> set[str]:
        """The objects a base may be part of, in one launch."""
        space = base.space
        if space == "param":
            j = int(base.ref)  # type: ignore[arg-type]
            a = launch.args[j] if j < len(launch.args) else None
            return _addr_buffers(a.address) if isinstance(a, BufferArg) else set()
        if space in ("global", "const"):
            return {f"@{base.ref}"}
        if space in ("shared", "local"):
            return {f"%{space}:{base.ref}"}
        if space == "null":
            return set()
        if space == "loaded":
            self.solve()
            return self._load(base, launch)
        return {EVERY}

    def _load(self, base: Base, launch: Launch) -> set[str]:
        out = set(self.anywhere)
        for s in base.ref:  # type: ignore[union-attr]
            for o in self.objects(s, launch) if s.space != "loaded" else self._load(s, launch):
                if o == EVERY:
                    for v in self.pts.values():
                        out |= v
                else:
                    out |= self.pts.get(o, set())
        return out

    # solving ---------------------------------------------------------------------------------
    def solve(self) -> None:
        if self._solved:
            return
        self._solved = True
        for g, refs in self.inits.items():
            self.pts.setdefault(g, set()).update(refs)
        copies = list(_copies(self.program.ops))
        launches = [(launch, summary) for launch, summary in self.launches() if summary.flows]
        for _ in range(1000):
            before = self._size()
            for launch, summary in launches:
                for f in summary.flows:
                    values = self._resolve(f.value, launch)
                    if values:
                        for c in self._resolve(f.container, launch):
                            self._add(c, values)
            for op in copies:
                dst = _addr_buffers(op.dst)  # type: ignore[arg-type]
                if op.kind == "H2D":
                    for _, ref in op.pointers:
                        for d in dst:
                            self._add(d, _addr_buffers(ref))
                    for d in dst:
                        for v in op.via:
                            self._add(d, self.pts.get(v, set()))
                elif op.kind == "D2D":
                    for s in _addr_buffers(op.src):  # type: ignore[arg-type]
                        for d in dst:
                            self._add(d, self.pts.get(s, set()))
            if self._size() == before:
                return
        self.anywhere.add(EVERY)  # did not settle (it always does): give up precision

    def _resolve(self, base: Base, launch: Launch) -> set[str]:
        if base.space == "loaded":
            return self._load(base, launch)
        return self.objects(base, launch)

    def _add(self, container: str, values: set[str]) -> None:
        if container == EVERY:
            self.anywhere |= values
        else:
            self.pts.setdefault(container, set()).update(values)

    def _size(self) -> int:
        return len(self.anywhere) + sum(len(v) for v in self.pts.values())

    def escaped(self) -> frozenset[str]:
        """Every object whose address may sit in memory (a pointer loaded anywhere may reach
        it): such a buffer must keep its identity (never be split or contracted)."""
        self.solve()
        out = set(self.anywhere)
        for v in self.pts.values():
            out |= v
        return frozenset(self.expand(out))

    def expand(self, objects: set[str]) -> set[str]:
        """`*` replaced by every host buffer and every module global."""
        if EVERY not in objects:
            return objects
        return (objects - {EVERY}) | {b.name for b in self.program.buffers} | set(self.globals)


def _copies(ops) -> Iterable[Copy]:
    from sirius.analysis.host.model import Loop

    for op in ops:
        if isinstance(op, Copy) and op.kind in ("H2D", "D2D"):
            yield op
        elif isinstance(op, Loop):
            yield from _copies(op.body)
