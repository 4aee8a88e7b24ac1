"""Soundness of the static access relations against dynamic traces of the CPU executor.

The executor records, per dynamic launch, every global and shared memory access of every thread
(`LaunchTrace`). `check_trace` verifies that each byte each record touches lies in the static
relation of its statement instance: the launch's kernel-level byte relation for that buffer and
kind, with the host loop variables fixed to the instance's values. A record outside is a
`Violation`: the analysis under-approximated, which is a bug. The check is vectorised: each
static relation is compiled once into integer constraint rows (`islutil.Compiled`) and evaluated
with numpy over all the records of a (launch, buffer, kind) group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import islpy as isl
import numpy as np

from sirius.analysis import islutil
from sirius.analysis.kernel.affine import THREAD_DIMS
from sirius.analysis.uar.build import UAR

RECORD_DTYPE = np.dtype([
    ("bx", np.int32), ("by", np.int32), ("bz", np.int32),
    ("tx", np.int32), ("ty", np.int32), ("tz", np.int32),
    ("space", np.uint8), ("buffer", np.int32), ("offset", np.int64), ("size", np.int32),
    ("kind", np.uint8),
])
SPACES = ("global", "shared", "variable")  # 2: a module global (`__device__`, `__constant__`)
KINDS = ("load", "store", "atomic")
# the static kinds whose union must contain a dynamic access of each kind (an atomic reads and
# writes: it must be inside both unions)
_COVER = {0: [("load", "atomic")], 1: [("store", "atomic")],
          2: [("load", "atomic"), ("store", "atomic")]}
MAX_LISTED = 1000


@dataclass(frozen=True, slots=True)
class LaunchTrace:
    launch_index: int  # index in host_program.launches()
    env: dict[str, int]  # host loop variable -> value for this dynamic instance
    records: np.ndarray  # RECORD_DTYPE
    # Optional: the names behind the shared `buffer` numbers of the records (IR names of
    # __shared__ globals, "extern" for the dynamic area). Empty: numbers index the kernel's
    # shared arrays (KernelInfo.shared_arrays order).
    shared: tuple[str, ...] = ()
    # The IR names behind the `buffer` numbers of space-2 records (module globals).
    globals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Violation:
    launch_index: int
    statement: str
    kernel: str
    env: dict[str, int]
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    space: str
    buffer: str
    offset: int
    size: int
    kind: str

    def __str__(self) -> str:
        env = ", ".join(f"{k}={v}" for k, v in self.env.items())
        return (f"{self.statement} {self.kernel}[{env}] block {self.block} thread {self.thread}: "
                f"{self.kind} of {self.size} B at {self.space} {self.buffer}+{self.offset} "
                "is outside the static relation")


@dataclass(frozen=True, slots=True)
class SoundnessReport:
    violations: tuple[Violation, ...]  # the first MAX_LISTED
    violation_count: int
    records: int
    launches: int
    loose: int  # records checked against a relation whose existentials isl could not resolve
    exact_accesses: int
    static_accesses: int
    per_launch: dict[int, int] = field(default_factory=dict)  # launch index -> violations

    @property
    def ok(self) -> bool:
        return self.violation_count == 0

    @property
    def exact_share(self) -> float:
        return self.exact_accesses / self.static_accesses if self.static_accesses else 1.0

    def summary(self) -> str:
        head = (f"{self.records} accesses in {self.launches} launches checked: "
                f"{self.violation_count} outside the static relations; "
                f"{self.exact_accesses}/{self.static_accesses} static accesses exact "
                f"({100 * self.exact_share:.1f}%)"
                + (f"; {self.loose} checked against a hull" if self.loose else ""))
        return "\n".join([head, *(f"  {v}" for v in self.violations[:20])])


class _Checker:
    def __init__(self, uar: UAR):
        self.uar = uar
        self.launch_stmts = [st for st in uar.statements if st.kind == "launch"]
        self.names = {b.id: b.name for b in uar.program.buffers}
        self._compiled: dict[tuple, islutil.Compiled | None] = {}
        self.loose = 0
        self.variables: list[str] = []  # numbering of the module globals seen in traces

    def _variable_numbers(self, trace: LaunchTrace) -> np.ndarray:
        """Record numbers of module globals (trace.globals) -> this checker's numbering."""
        out = []
        for name in getattr(trace, "globals", ()) or ():
            if f"@{name}" not in self.variables:
                self.variables.append(f"@{name}")
            out.append(self.variables.index(f"@{name}"))
        return np.array(out + [-1], dtype=np.int64)

    def compiled(self, li: int, space: int, buf: int, kinds: tuple[str, ...],
                 missing: tuple[str, ...]) -> islutil.Compiled | None:
        key = (li, space, buf, kinds, missing)
        if key not in self._compiled:
            le = self.uar.launch_effects[li]
            table: dict = (le.global_, le.shared, le.variables)[space]
            ref = buf if space < 2 else \
                self.variables[buf] if 0 <= buf < len(self.variables) else None
            rel: isl.Map | None = None
            for k in kinds:
                m = table.get((ref, k))
                if m is not None:
                    rel = m if rel is None else rel.union(m)
            if rel is None:
                self._compiled[key] = None
            else:
                flat = islutil.flat(rel)
                flat = islutil.name_dims(flat, "set", [*THREAD_DIMS, "x"])
                self._compiled[key] = islutil.Compiled(islutil.project_out(flat, missing))
        return self._compiled[key]

    def _kernel_shared(self, trace: LaunchTrace) -> np.ndarray | None:
        """Record shared-array numbers -> the kernel's own numbering (-1: not the kernel's)."""
        names = getattr(trace, "shared", ()) or ()
        if not names:
            return None
        summary = self.uar.launch_effects[trace.launch_index].summary
        mine = list(summary.shared_globals)
        extern = [i for i, n in enumerate(summary.shared_bytes) if n == 0]
        table = [mine.index(n) if n in mine else (extern[0] if n == "extern" and extern else -1)
                 for n in names]
        return np.array(table + [-1], dtype=np.int64)

    def check(self, trace: LaunchTrace) -> tuple[np.ndarray, int]:
        """Indices of the records of one trace that are outside, and the record count."""
        rec = trace.records
        table = self._kernel_shared(trace)
        if table is not None and len(rec):
            rec = rec.copy()
            shared = rec["space"] == 1
            idx = np.clip(rec["buffer"][shared].astype(np.int64), -1, len(table) - 1)
            rec["buffer"][shared] = table[idx]
        var = rec["space"] == 2
        if var.any():
            numbers = self._variable_numbers(trace)
            rec = rec.copy()
            idx = np.clip(rec["buffer"][var].astype(np.int64), -1, len(numbers) - 1)
            rec["buffer"][var] = numbers[idx]
        bad = np.zeros(len(rec), dtype=bool)
        le = self.uar.launch_effects[trace.launch_index]
        params: set[str] = set()
        for table in (le.global_, le.shared, le.variables):
            for m in table.values():
                params |= set(islutil.param_names(m))
        missing = tuple(sorted(p for p in params if p not in trace.env))
        groups = np.stack([rec["space"].astype(np.int64), rec["buffer"].astype(np.int64),
                           rec["kind"].astype(np.int64)], axis=1) if len(rec) else \
            np.zeros((0, 3), dtype=np.int64)
        for space, buf, kind in np.unique(groups, axis=0):
            idx = np.nonzero((groups[:, 0] == space) & (groups[:, 1] == buf)
                             & (groups[:, 2] == kind))[0]
            sub = rec[idx]
            for kinds in _COVER[int(kind)]:
                comp = self.compiled(trace.launch_index, int(space), int(buf), kinds, missing)
                if comp is None:
                    bad[idx] = True
                    continue
                self.loose += len(sub) if comp.loose else 0
                cols = {d: sub[d] for d in THREAD_DIMS}
                inside = np.ones(len(sub), dtype=bool)
                for j in range(int(sub["size"].max(initial=0))):
                    live = sub["size"] > j
                    cols["x"] = sub["offset"] + j
                    inside &= ~live | comp(cols, trace.env)
                bad[idx[~inside]] = True
        return np.nonzero(bad)[0], len(rec)

    def violation(self, trace: LaunchTrace, r) -> Violation:
        st = self.launch_stmts[trace.launch_index]
        space = SPACES[int(r["space"])]
        if space == "global":
            buf = self.names.get(int(r["buffer"]), f"#{int(r['buffer'])}")
        elif space == "variable":
            i = int(r["buffer"])
            names = getattr(trace, "globals", ()) or ()
            buf = "@" + names[i] if 0 <= i < len(names) else f"@#{i}"
        else:
            summary = self.uar.launch_effects[trace.launch_index].summary
            i = int(r["buffer"])
            names = getattr(trace, "shared", ()) or summary.shared_globals
            buf = names[i] if 0 <= i < len(names) else f"#{i}"
        return Violation(trace.launch_index, st.id, st.label, dict(trace.env),
                         (int(r["bx"]), int(r["by"]), int(r["bz"])),
                         (int(r["tx"]), int(r["ty"]), int(r["tz"])), space, buf,
                         int(r["offset"]), int(r["size"]), KINDS[int(r["kind"])])


def check_trace(analysis: UAR, traces: Iterable[LaunchTrace]) -> SoundnessReport:
    """Every dynamic access that is not in the static relation of its statement instance."""
    checker = _Checker(analysis)
    listed: list[Violation] = []
    count = records = launches = 0
    per_launch: dict[int, int] = {}
    for trace in traces:
        bad, n = checker.check(trace)
        records += n
        launches += 1
        if len(bad):
            count += len(bad)
            per_launch[trace.launch_index] = per_launch.get(trace.launch_index, 0) + len(bad)
            for i in bad[: max(0, MAX_LISTED - len(listed))]:
                listed.append(checker.violation(trace, trace.records[i]))
    exact, total = analysis.exactness()
    return SoundnessReport(tuple(listed), count, records, launches, checker.loose, exact, total,
                           per_launch)
