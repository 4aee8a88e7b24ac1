"""What differential verification found: one row per (order, compared buffer), the original's
own order dependence, faults, and the verdict, as a table (rich or plain) or JSON."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from sirius.verify.compare import tolerance_text
from sirius.verify.counters import Counters, ratios
from sirius.verify.observe import Compared

# verdict -> exit status of `sirius verify` (docs/verify.md#exit-status)
OK, MISMATCH, ORDER_DEPENDENT = "ok", "mismatch", "original-order-dependent"
EXIT_STATUS = {OK: 0, MISMATCH: 1, ORDER_DEPENDENT: 3}


@dataclass(frozen=True, slots=True)
class VerifyRow:
    """One (order, output buffer) of the fused run against the original. `error` is set when the
    buffer could not be compared (the fused run faulted, or does not have the buffer); the
    numbers are then None. `reference` names the original run it was compared with: `forward`,
    or the row's own order for a buffer the original computes order-dependently; such a row is
    not `checkable` (a difference there is not blamed on the fusion). `first_index` is the
    first differing element, `first_got` / `first_want` its fused and original values."""

    order: str
    buffer: str
    dtype: str
    elements: int
    mismatches: int | None
    max_abs: float | None
    max_rel: float | None
    bitwise: bool
    tolerance: str
    ok: bool
    error: str = ""
    reference: str = "forward"
    checkable: bool = True
    first_index: int | None = None
    first_got: str = ""
    first_want: str = ""
    # the fused program's buffers the row was read back from (storage splitting's versions,
    # version 0 first; () for a buffer compared as itself), and the elements where a version
    # still held its initial contents and they were taken as the original's
    through: tuple[str, ...] = ()
    kept_initial: int = 0

    @property
    def failed(self) -> bool:
        """A difference blamed on the fusion."""
        return not self.ok and self.checkable

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in self.__slots__}
        out["through"] = list(self.through)
        for k in ("max_abs", "max_rel"):
            v = out[k]
            if v is not None and not math.isfinite(v):
                out[k] = str(v)  # JSON has no inf / nan
        return out

    def mismatch_line(self) -> str:
        """`reverse, c: 4096 of 4096 elements differ; first at [0]: fused 1.5, original 2`."""
        head = f"{self.order}, {self.buffer}: "
        if self.error:
            return head + self.error
        text = f"{head}{self.mismatches} of {self.elements} elements differ"
        if self.first_index is not None:
            text += (f"; first at [{self.first_index}]: fused {self.first_got}, "
                     f"original {self.first_want}")
        return text


@dataclass(frozen=True, slots=True)
class OrderDependence:
    """A buffer whose final contents differ between two runs of the original program."""

    buffer: str
    elements: int
    mismatches: int
    first_index: int | None
    first: str  # the value in the first order's run
    second: str  # ... and in the second's

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    rows: tuple[VerifyRow, ...]
    faults: tuple[tuple[str, str], ...]  # (order, message) of fused runs that faulted
    seed: int
    orders: tuple[str, ...]
    exact: bool
    check_bounds: bool
    outputs: tuple[str, ...]
    output_rule: str  # "outputs" (role output or D2H copies) or "all buffers"
    reference_launches: int
    fused_launches: tuple[tuple[str, int], ...]  # (order, dynamic launches) of completed runs
    seconds: float
    original_orders: tuple[str, ...] = ("forward", "reverse")
    order_dependent: tuple[OrderDependence, ...] = ()
    # the executor's counts summed over a run: the reference run of the original, and the
    # first fused run that completed (None when every fused run faulted)
    original_counters: Counters | None = None
    fused_counters: Counters | None = None
    # the same sums over the launches of the one-time prepare part only (original, fused),
    # where the program has one (sirius/fusion/plan/prepare.py); per inference = total - these
    prepare_counters: tuple[Counters | None, Counters | None] | None = None
    # each compared buffer with why it is compared (and its versions), and (buffer, why) of
    # the original's buffers not compared; see sirius.verify.observe
    compared: tuple[Compared, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # how the runs went: a fallback to serial, --fail-fast
    jobs: int = 1  # worker processes the runs used
    not_run: tuple[str, ...] = ()  # fused orders not run or not finished (--fail-fast)
    # verify_fused(keep=...): the original's reference run and the fused run in the first
    # order (None where it did not finish), with the kept buffers' contents (not in to_json)
    first_runs: tuple[object, object] | None = None
    # launch replay (sirius/verify/replay.py): (order, launches it took from the fused run in
    # the first order) of completed runs, the kernels that could be replayed, and (kernel, why
    # not) for the original's other kernels in the fused module
    replayed: tuple[tuple[str, int], ...] = ()
    replay_kernels: tuple[str, ...] = ()
    not_replayed: tuple[tuple[str, str], ...] = ()

    def counters(self) -> dict:
        """`{"original": {...}, "fused": {...}, "ratio": {...}}` (fused / original); a side
        that did not run is None."""
        o = self.original_counters.to_json() if self.original_counters else None
        f = self.fused_counters.to_json() if self.fused_counters else None
        out = {"original": o, "fused": f, "ratio": ratios(o, f) if o and f else None}
        if self.prepare_counters is not None:
            po, pf = (c.to_json() if c else None for c in self.prepare_counters)
            io = {k: v - po[k] for k, v in o.items()} if o and po else None
            inf = {k: v - pf[k] for k, v in f.items()} if f and pf else None
            out["prepare"] = {"original": po, "fused": pf}
            out["per_inference"] = {"original": io, "fused": inf,
                                    "ratio": ratios(io, inf) if io and inf else None}
        return out

    @property
    def status(self) -> str:
        """`mismatch` (the fusion is blamed: a checkable row differs or a fused run faulted),
        else `original-order-dependent` (the original's own runs differ), else `ok`."""
        if self.faults or self.failed():
            return MISMATCH
        return ORDER_DEPENDENT if self.order_dependent else OK

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.status]

    def failed(self) -> list[VerifyRow]:
        return [r for r in self.rows if r.failed]

    def unchecked(self) -> list[VerifyRow]:
        return [r for r in self.rows if not r.ok and not r.checkable]

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "status": self.status, "seed": self.seed, "orders": list(self.orders),
            "original_orders": list(self.original_orders), "exact": self.exact,
            "check_bounds": self.check_bounds, "outputs": list(self.outputs),
            "output_rule": self.output_rule, "tolerance": tolerance_text(self.exact),
            "compared": [c.to_json() for c in self.compared],
            "not_compared": [{"buffer": b, "why": w} for b, w in self.skipped],
            "jobs": self.jobs, "notes": list(self.notes), "not_run": list(self.not_run),
            "reference_launches": self.reference_launches,
            "fused_launches": dict(self.fused_launches),
            "order_dependent": [d.to_json() for d in self.order_dependent],
            "faults": [{"order": o, "message": m} for o, m in self.faults],
            "rows": [r.to_json() for r in self.rows], "counters": self.counters(),
            "replay": self.replay_json(), "seconds": round(self.seconds, 3),
        }

    def replay_json(self) -> dict:
        """Launch replay: the launches each fused run in a later order replayed, the kernels
        it could replay, and why the original's other kernels in the fused module could not
        be."""
        return {"launches": dict(self.replayed), "kernels": list(self.replay_kernels),
                "not_replayed": dict(self.not_replayed)}

    def brief(self) -> dict:
        """Which check ran and what it found, for plan.json."""
        return {
            "ran": True, "engine": "CPU executor", "status": self.status, "ok": self.ok,
            "seed": self.seed, "orders": list(self.orders),
            "original_orders": list(self.original_orders), "check_bounds": self.check_bounds,
            "exact": self.exact, "compared": list(self.outputs),
            "why_compared": {c.buffer: c.why for c in self.compared},
            "not_compared": {b: w for b, w in self.skipped},
            "order_dependent": [d.buffer for d in self.order_dependent],
            "failed": [r.mismatch_line() for r in self.failed()],
            "faults": [f"{o}: {m}" for o, m in self.faults],
            "counters": self.counters(), "replay": self.replay_json(),
            "seconds": round(self.seconds, 3),
        }

    def verdict(self) -> str:
        if self.status == OK:
            return "verdict: OK, the fused program computes what the original does"
        if self.status == MISMATCH:
            faulted = f", {len(self.faults)} faulted runs" if self.faults else ""
            return f"verdict: NOT OK ({len(self.failed())} of {len(self.rows)} rows differ" \
                   f"{faulted})"
        names = ", ".join(d.buffer for d in self.order_dependent)
        return ("verdict: INCONCLUSIVE, the original program is order-dependent (" + names +
                "): a race or colliding writes in the program itself, not a fusion error; "
                "every other compared buffer agrees")

    def render(self) -> str:
        try:
            return self._render_rich()
        except ImportError:  # pragma: no cover - rich is a dependency, but stay usable without
            return self._render_plain()

    def _cells(self, r: VerifyRow) -> list[str]:
        if r.error:
            return [r.order, r.buffer, r.dtype, str(r.elements), "-", "-", "-", "-",
                    r.tolerance, "FAIL: " + r.error]
        result = "FAIL" if r.failed else "ok" if r.ok else "unchecked"
        if not r.checkable:  # an order-dependent buffer, against the original in this order
            result += " (same order)"
        return [r.order, r.buffer, r.dtype, str(r.elements), str(r.mismatches),
                _num(r.max_abs), _num(r.max_rel), "yes" if r.bitwise else "no", r.tolerance,
                result]

    def _header(self) -> list[str]:
        return ["order", "buffer", "dtype", "elements", "mismatches", "max abs", "max rel",
                "bitwise", "tolerance", "result"]

    def _summary(self) -> list[str]:
        fused = ", ".join(f"{o}: {n}" for o, n in self.fused_launches) or "none completed"
        runs = " and ".join(self.original_orders)
        lines = [f"reference: original, {self.original_orders[0]} order, "
                 f"{self.reference_launches} launches; fused launches: {fused}"]
        if len(self.original_orders) > 1:
            lines.append(f"original run in {runs} order: " +
                         ("order-dependent" if self.order_dependent else "deterministic"))
        else:
            lines.append(f"original run once ({runs} order): every fused run agreed with it, "
                         "so its determinism was not checked (a second run is made when one "
                         "differs)" if not self.failed() else f"original run once ({runs} order)")
        if self.replayed:
            per = ", ".join(f"{o}: {n}" for o, n in self.replayed)
            lines.append(f"replayed launches ({per}): launches of {len(self.replay_kernels)} "
                         "kernel(s) the fusion did not make, on inputs equal to the first "
                         "order's, took the first order's result (--no-replay runs them)")
        lines += [f"seed {self.seed}; compared: {self.output_rule}; "
                  f"check bounds: {'on' if self.check_bounds else 'off'}",
                  f"tolerance: {tolerance_text(self.exact)}"]
        lines += [f"compared {c.buffer}: {c.why}" + (
            " (" + ", ".join(n for n, _, _ in c.versions) + ")" if c.versions else "")
            for c in self.compared]
        lines += [f"not compared {b}: {w}" for b, w in self.skipped]
        kept = {r.buffer: r.kept_initial for r in self.rows if r.kept_initial}
        lines += [f"  {b}: {n} elements still held a version's initial contents, as the "
                  "original's do (unwritten, or rewritten with the same value)"
                  for b, n in kept.items()]
        for d in self.order_dependent:
            at = "" if d.first_index is None else \
                f"; first at [{d.first_index}]: {d.first} vs {d.second}"
            lines.append(f"original is order-dependent: {d.buffer}: {d.mismatches} of "
                         f"{d.elements} elements differ between its {runs} runs{at}")
        if self.order_dependent:
            lines.append("  those buffers are compared with the original run in the same order; "
                         "a difference there is 'unchecked', not blamed on the fusion")
        c = self.counters()
        for what, part in (("executor counts", c),
                           ("per inference (the prepare part left out)", c.get("per_inference"))):
            if part and part["ratio"]:
                lines.append(f"{what}, original -> fused: " + ", ".join(
                    f"{k.replace('_', ' ')} {part['original'][k]} -> {part['fused'][k]}"
                    + (f" ({r:.3g}x)" if (r := part["ratio"][k]) is not None else "")
                    for k in part["original"]))
        lines.append("runs: " + (f"{self.jobs} worker processes" if self.jobs > 1
                                 else "one after another in this process"))
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"fault ({o}): {m}" for o, m in self.faults]
        lines += [f"mismatch: {r.mismatch_line()}" for r in self.failed()]
        lines.append(self.verdict())
        return lines

    def _render_rich(self) -> str:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="fused vs original")
        for h in self._header():
            table.add_column(h, justify="right" if h in ("elements", "mismatches", "max abs",
                                                         "max rel") else "left")
        for r in self.rows:
            table.add_row(*self._cells(r), style=None if r.ok else "red")
        buf = io.StringIO()
        console = Console(file=buf, width=140, force_terminal=False, color_system=None)
        console.print(table)
        for line in self._summary():
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return buf.getvalue().rstrip() + "\n"

    def _render_plain(self) -> str:
        grid = [self._header()] + [self._cells(r) for r in self.rows]
        widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                 for row in grid]
        return "\n".join(lines + self._summary()) + "\n"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"
