"""The one-time `prepare` part of a program (issue 14, item 8): launches that compute only from
the model's parameters (a weight transpose, a constant folded on the GPU) give the same result
in every inference, so they belong to a part that runs once, apart from the per-inference part.
A host-program rewrite before pruning, storage splitting and planning, on the program as written
(so the original's launches have the same numbers): each such launch is marked
(`Launch.prepare`), the planner never puts a prepare launch and a per-inference launch into one
kernel (a region ends where the part changes), and reports and counters show the two parts
apart.

**Parameters.** The buffers the user names (`--params NAME,...`, shell-style patterns allowed),
else, for a program that `sirius import-tvm` wrote, the buffers its `NAME.json` gives role
`param`; else none, and no launch is prepare. A named buffer that some operation other than a
host-to-device copy writes is not a parameter (a note says which operation writes it).

**Prepare launches**, in program order: a launch L is prepare when

- it is not inside a host loop and acts only through memory (no call left a call, no inline
  asm: as prune.py asks);
- every buffer it may read is a parameter or a buffer a prepare launch before it wrote
  (buffer level, from the UAR's effects, which over-approximate what a launch reads), and
  nothing writes it after L (a parameter uploaded again later would make L's result depend on
  which upload it saw);
- every buffer it may write is no parameter, is written by no other operation of the program
  and read by none before L (so what it writes is a function of the parameters alone, and
  stays so for every later inference).

Then the buffers L writes are derived from the parameters too. Each prepare launch is a
`PrepareLaunch` record with its reason, in report.md ("Prepare part") and plan.json
(`"prepare"`). The interpreter still runs the whole program once; the split says which launches
a deployment runs once and which per inference.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sirius.analysis.host.model import Copy, HostProgram, Loop, Op
from sirius.analysis.kernel.facts import KernelInfo
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.effects import READ, WRITE
from sirius.diagnostics import Location, SiriusError
from sirius.fusion.plan.prune import pure_launch

TVM_SCHEMA = "sirius-tvm-import/1"


@dataclass(frozen=True, slots=True)
class PrepareLaunch:
    statement: str
    kernel: str
    loc: Location | None
    reads: tuple[str, ...]
    writes: tuple[str, ...]

    def reason(self) -> str:
        what = ", ".join(self.reads) or "nothing"
        return (f"reads only parameters or what the prepare part computed ({what}); "
                f"writes {', '.join(self.writes) or 'nothing'}, which nothing else writes")

    def to_json(self) -> dict:
        return {"statement": self.statement, "kernel": self.kernel,
                "loc": str(self.loc) if self.loc else None, "reads": list(self.reads),
                "writes": list(self.writes), "reason": self.reason()}


@dataclass(frozen=True, slots=True)
class PrepareResult:
    host: HostProgram  # the input itself when no launch is prepare
    params: tuple[str, ...]  # the parameter buffers, as used
    launches: tuple[PrepareLaunch, ...]
    source: str  # where the parameters came from: "--params", "NAME.json (sirius import-tvm)"
    notes: tuple[str, ...] = ()

    @property
    def launch_indices(self) -> frozenset[int]:
        """The prepare launches as HostProgram.launches() numbers them (of `host`, and of the
        program it was found in: marking keeps the order)."""
        return frozenset(i for i, op in enumerate(self.host.launches()) if op.prepare)

    def to_json(self) -> dict:
        return {"params": list(self.params), "source": self.source,
                "launches": [p.to_json() for p in self.launches], "notes": list(self.notes)}


def params_for(files: Sequence[Path | str], given: Sequence[str] | None
               ) -> tuple[tuple[str, ...], str]:
    """The parameter patterns and where they come from: `given` (`--params`), else the
    role-`param` buffers of the `sirius import-tvm` sidecar `NAME.json` of a single input
    `NAME.cu`, else none."""
    if given is not None:
        return tuple(given), "--params"
    if len(files) != 1:
        return (), ""
    side = Path(files[0]).with_suffix(".json")
    if not side.is_file():
        return (), ""
    try:
        doc = json.loads(side.read_text())
    except (OSError, ValueError):
        return (), ""
    if not isinstance(doc, dict) or doc.get("schema") != TVM_SCHEMA:
        return (), ""
    names = tuple(b["name"] for b in doc.get("buffers", ())
                  if isinstance(b, dict) and b.get("role") == "param" and "name" in b)
    return names, f"{side.name} (sirius import-tvm)"


def find_prepare(host: HostProgram, uar: UAR, kernels: Sequence[KernelInfo],
                 patterns: Sequence[str], source: str = "--params") -> PrepareResult:
    """`host` with its prepare launches marked (module doc); `uar` must be built on `host`."""
    names = [b.name for b in host.buffers]
    params: list[str] = []
    for p in patterns:
        hit = [n for n in names if fnmatch.fnmatchcase(n, p)]
        if not hit and source == "--params":
            raise SiriusError(f"--params {p}: no buffer of the program is named so (buffers: "
                              f"{', '.join(names[:12])}{' ...' if len(names) > 12 else ''})")
        params += [n for n in hit if n not in params]
    if not params:
        return PrepareResult(host, (), (), source)
    reads: dict[str, set[str]] = {}
    writes: dict[str, set[str]] = {}
    for st in uar.statements:
        for e in uar.effects.get(st.id, ()):
            if e.mode == READ or e.atomic or e.mode not in (READ, WRITE):
                reads.setdefault(st.id, set()).add(e.buffer)
            if e.mode == WRITE or e.atomic or e.mode not in (READ, WRITE):
                writes.setdefault(st.id, set()).add(e.buffer)
    writers: dict[str, list[str]] = {}
    for st in uar.statements:
        for b in writes.get(st.id, ()):
            writers.setdefault(b, []).append(st.id)
    by_id = {st.id: st for st in uar.statements}
    notes: list[str] = []
    derived: set[str] = set()
    for p in params:
        other = [s for s in writers.get(p, ()) if not (isinstance(by_id[s].op, Copy)
                                                       and by_id[s].op.kind == "H2D")]
        if other:
            st = by_id[other[0]]
            notes.append(f"{p} is not a parameter: {st.id} {st.label}"
                         f"{f' ({st.loc})' if st.loc else ''} writes it")
        else:
            derived.add(p)
    used = tuple(p for p in params if p in derived)
    infos = {k.mangled: k for k in kernels}
    order = {st.id: i for i, st in enumerate(uar.statements)}
    last_write = {b: max(order[x] for x in ws) for b, ws in writers.items()}
    read_so_far: set[str] = set()
    marked: dict[int, PrepareLaunch] = {}
    for st in uar.statements:
        r, w = reads.get(st.id, set()), writes.get(st.id, set())
        if st.kind == "launch" and not st.loops and pure_launch(st, infos) and r <= derived \
                and all(last_write.get(b, -1) < order[st.id] for b in r) \
                and w and not (w & derived) and not (w & read_so_far) \
                and all(writers.get(b) == [st.id] for b in w):
            marked[id(st.op)] = PrepareLaunch(st.id, st.label, st.loc, tuple(sorted(r)),
                                           tuple(sorted(w)))
            derived |= w
        read_so_far |= r
    if not marked:
        return PrepareResult(host, used, (), source, tuple(notes))
    ops = _marked(host.ops, set(marked))
    return PrepareResult(dataclasses.replace(host, ops=ops), used,
                         tuple(sorted(marked.values(), key=lambda p: order[p.statement])),
                         source, tuple(notes))


def _marked(ops: tuple[Op, ...], ids: set[int]) -> tuple[Op, ...]:
    out: list[Op] = []
    for op in ops:
        if id(op) in ids:
            out.append(dataclasses.replace(op, prepare=True))  # type: ignore[arg-type]
        elif isinstance(op, Loop):
            out.append(dataclasses.replace(op, body=_marked(op.body, ids)))
        else:
            out.append(op)
    return tuple(out)
