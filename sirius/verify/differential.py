"""Differential verification of a fused program: run the original (forward order, the
reference; and once more in reverse order when a fused run differs from it, to know whether the
original is itself deterministic there) and the fused program under several block/thread
orders on the CPU executor, with the same seeded inputs, and compare what they leave in the
observable buffers (docs/verify.md).

```python
rep = verify_fused(original, fused, seed=7, orders=("forward", "reverse", "random:1"))
rep.ok; rep.status; rep.rows; print(rep.render()); rep.to_json()
```

`original` has `.program` (device_ir, device_module, files), `.kernels` (KernelInfo) and `.host`
(HostProgram); `fused` has `.device_ir` and `.host`, optionally `.kernels` and `.device_module`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Collection, Sequence

import numpy as np

from sirius.verify.compare import TOLERANCES, Comparison, compare, tol_text, tolerance_text
from sirius.verify.counters import Counters
from sirius.verify.observe import Compared, Observation, as_original, observe, observed
from sirius.verify.replay import ReplaySetup, replay_kernels
from sirius.verify.result import OrderDependence, VerifyReport, VerifyRow
from sirius.verify.runs import (
    HeadStart,
    LazyProgram,
    RunContext,
    Runner,
    RunOutput,
    RunSpec,
)

__all__ = ["ORDERS", "TOLERANCES", "Comparison", "Compared", "Observation", "OrderDependence",
           "VerifyReport", "VerifyRow", "compare", "observe", "observed", "tolerance_text",
           "verify_fused"]

ORDERS = ("forward", "reverse", "random:1")
ORIGINAL_ORDERS = ("forward", "reverse")


# running ------------------------------------------------------------------------------------------

def _fused_program(original, fused) -> LazyProgram:
    """The fused program as the executor loads it; its device module is parsed only if this
    process runs it (the fused runs go to worker processes, which parse their own)."""
    files = getattr(fused, "files", None) or original.program.files
    return LazyProgram(fused.device_ir, tuple(files), getattr(fused, "device_module", None))


def _run(host, program, kernels, order: str, seed: int, check_bounds: bool, dtypes=None):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    dev = CpuDevice(order=order, seed=seed, check_bounds=check_bounds)
    return run_host_program(host, program, kernels, dev, seed=seed, order=order, dtypes=dtypes)


def start_reference(original, seed: int = 7,
                    original_orders: Sequence[str] = ORIGINAL_ORDERS) -> HeadStart | None:
    """The original's reference run (its first order), started now in a worker process of its
    own, to be handed to `verify_fused(..., head=...)` once the fusion is built: it keeps every
    buffer the original observes (`observed`), which is all a comparison can ask of it. None
    where a second process cannot start (then verify_fused runs it as before)."""
    from sirius.runtime.interpreter import buffer_dtypes

    names, _ = observed(original.host)
    side = (original.host, original.program.device_ir, tuple(original.program.files))
    kernels = tuple(original.kernels)
    ctx = RunContext(side, side, {"original": kernels, "fused": kernels}, seed,
                     buffer_dtypes(original.host, {k.mangled: k for k in kernels}),
                     {"original": frozenset(names), "fused": frozenset(names)})
    first = original_orders[0]
    try:
        return HeadStart(ctx, RunSpec("original", first),
                         f"running the original program ({first} order, seed {seed})")
    except (OSError, ValueError, ImportError):
        return None


def verify_fused(original, fused, *, seed: int = 7, orders: Sequence[str] = ORDERS,
                 exact: bool = False, check_bounds: bool = True,
                 original_orders: Sequence[str] = ORIGINAL_ORDERS,
                 progress: Callable[[str], None] | None = None, jobs: int | None = 1,
                 fail_fast: bool = False,
                 launch_progress: Callable[[str], None] | None = None,
                 keep: Collection[str] = (), head: HeadStart | None = None,
                 replay: bool = True) -> VerifyReport:
    """Run `original` in the first of `original_orders` (no bounds checks; the reference) and
    `fused` under every order of `orders`, on the same seeded inputs, and compare the
    observable buffers. The original runs in the other `original_orders` only when a fused run
    differs from the reference in some buffer (a second run that every fused run agrees with
    would change nothing), and then before that difference is reported.

    A buffer the original's own runs leave different is order-dependent (a race, colliding
    writes): the fused run is compared with the original run in the same order there, and a
    difference is reported as unchecked, not blamed on the fusion (`rep.status` is then
    `original-order-dependent`). An error of a fused run (a KernelFault: out of bounds,
    divergent barrier; any other SiriusError) is a mismatch, not an exception; an error of the
    original is raised (the reference must run). `exact` demands bitwise equality of floats
    too; `check_bounds` runs the fused program with the executor's bounds checks.

    `jobs`: worker processes for the runs (None: one per core; 1, the default: one run after
    another in this process; sirius.verify.runs). `fail_fast`: stop at the first fused run
    that differs or faults (the runs not finished are named in `rep.notes`).
    `launch_progress(line)` is called after every launch of every run. `keep`: buffers whose
    initial and final contents come back as well, in `rep.first_runs` (the original's reference
    run and the fused run in the first order), for a caller that checks them another way.
    `head`: the reference run, started ahead (`start_reference`); used when it is that run with
    these inputs and keeps every buffer compared, else ended and run again here. `replay`:
    the fused runs after the first order take the first order's result of a launch of a kernel
    the fusion did not make, on the same inputs (sirius/verify/replay.py)."""
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    first, *others = original_orders
    seen = observe(original.host, fused.host, getattr(fused, "storage", None))
    names, rule = seen.names, seen.rule
    for c in seen.compared:
        if c.versions:
            say(f"  {c.buffer}: compared through its versions "
                + ", ".join(n for n, _, _ in c.versions))
    from sirius.runtime.interpreter import buffer_dtypes

    prog = _fused_program(original, fused)
    kernels = getattr(fused, "kernels", None) or original.kernels
    versions = {n for c in seen.compared for n, _, _ in c.versions}
    ctx = RunContext(
        (original.host, original.program.device_ir, tuple(original.program.files)),
        (fused.host, prog.device_ir, prog.files),
        {"original": tuple(original.kernels), "fused": tuple(kernels)}, seed,
        buffer_dtypes(original.host, {k.mangled: k for k in original.kernels}),
        {"original": frozenset(names) | frozenset(keep),
         "fused": frozenset(names) | versions | frozenset(keep)},
        frozenset(versions) | frozenset(keep))
    if head is not None and not (
            not keep and head.spec == RunSpec("original", first) and head.ctx.seed == seed
            and head.ctx.original[0] is original.host
            and head.ctx.keep["original"] >= ctx.keep["original"]
            and head.ctx.dtypes == ctx.dtypes):
        head.close()
        head = None
    setup, why_not = None, {}
    if replay and len(orders) > 1:
        static = [op.mangled for op in fused.host.launches()]
        kernels_ok, why_not = replay_kernels(original.program.device_ir, prog.device_ir)
        kernels_ok = kernels_ok & set(static)
        why_not = {k: w for k, w in why_not.items() if k in static}
        if kernels_ok:
            # three quarters of the launches replayed: the followers mostly wait, and the
            # leader takes the cores (at a half, paper deepspeech2's followers still ran 200
            # fused launches each, and a leader on both cores made its verify slower)
            most = 4 * sum(k in kernels_ok for k in static) >= 3 * len(static)
            setup = ReplaySetup.new(kernels_ok, most)
            ctx = dataclasses.replace(ctx, replay=setup)
    tick = launch_progress or (lambda _line: None)
    if head is not None and jobs is None:
        # the reference runs already: every fused order in a worker of its own, all at once,
        # so that they share the cores (two rounds of 2 workers for 3 runs take longer)
        jobs = max(os.cpu_count() or 1, len(orders))
    runner = Runner(ctx, jobs, lambda key, done, total: tick(f"{key}: launch {done} of {total}"),
                    say, {"original": original.program, "fused": prog}, started=say)
    originals: dict[str, RunOutput] = {}
    got: dict[str, RunOutput] = {}
    rows: dict[str, list[VerifyRow]] = {}
    faults: dict[str, str] = {}
    dependent: dict[str, OrderDependence] = {}
    asked = {first}
    # the other original orders, once a fused run differs somewhere (--fail-fast: at once, so
    # that the first difference can be judged as soon as it is seen)
    second: list[str] = list(others) if fail_fast else []

    def compare_order(order: str) -> bool:
        """Rows of a finished fused run, once the originals it needs are there."""
        out = got[order]
        ref = originals[first]
        if out.error is not None:
            msg = _one_line(out.error)
            faults[order] = msg
            say(f"  {order}: the fused run faulted: {msg}")
            rows[order] = [VerifyRow(order, name, want.dtype.name, want.size, None, None, None,
                                     False, tol_text(want, exact), False, "the run faulted")
                           for name, want in _wanted(ref, names)]
            return True
        if dependent and order not in originals:
            if order not in asked:
                asked.add(order)
                runner.submit(RunSpec("original", order), "running the original program "
                              f"({order} order) for its order-dependent buffers")
            return False
        rs = []
        for c in seen.compared:
            if c.buffer not in ref.final:
                continue
            name, want = c.buffer, ref.final[c.buffer]
            same_order = name in dependent
            if same_order:
                want = originals[order].final[name]
            have, taken = as_original(c, out.final, out.initial, want)
            rs.append(_row(order, name, want, have, exact,
                           reference=order if same_order else first,
                           checkable=not same_order, through=c.versions, kept=taken))
        if any(r.failed for r in rs) and others and not second:
            second.extend(others)  # is it the original's own order-dependence? run it again
            for o in others:
                if o not in asked:
                    asked.add(o)
                    runner.submit(RunSpec("original", o), "running the original program again "
                                  f"({o} order): the fused {order} run differs; is the "
                                  "original deterministic?")
            return False
        rows[order] = rs
        bad = sum(r.failed for r in rs)
        say(f"  {order}: " + (f"{bad} of {len(names)} buffers differ" if bad else "ok"))
        return True

    checked = ", bounds checked" if check_bounds else ""
    try:
        with runner:
            if head is not None:
                runner.adopt(head)
            else:
                runner.submit(RunSpec("original", first), f"running the original program "
                              f"({first} order, seed {seed})")
            for order in second:
                asked.add(order)
                runner.submit(RunSpec("original", order), "running the original program again "
                              f"({order} order): is it deterministic?")
            for order in orders:
                role = "" if setup is None else "record" if order == orders[0] else "play"
                runner.submit(RunSpec("fused", order, check_bounds, role),
                              f"running the fused program ({order} order{checked})")
            waiting: list[str] = []
            stopped = False
            for spec, out in runner.results():
                if spec.side == "original":
                    out.raise_error()  # the reference must run
                    originals[spec.order] = out
                    if (spec.order in (first, *second) and second
                            and all(o in originals for o in (first, *second))):
                        for o in second:
                            for d in _order_dependence(originals[first], originals[o], names,
                                                       exact):
                                dependent.setdefault(d.buffer, d)
                        if dependent:
                            say("  the original is order-dependent in " + ", ".join(dependent))
                            # the orders compared before this was known: again, same-order there
                            again = [o for o in rows if o not in faults]
                            for o in again:
                                del rows[o]
                            waiting = again + waiting
                else:
                    got[spec.order] = out
                    waiting.append(spec.order)
                if first not in originals or not all(o in originals for o in second):
                    continue
                waiting = [o for o in waiting if not compare_order(o)]
                if fail_fast and (faults or any(r.failed for rs in rows.values() for r in rs)):
                    stopped = True
                    break
            if stopped:
                left = [o for o in orders if o not in rows]
                runner.cancel()
                if left:
                    runner.notes.append("--fail-fast: stopped at the first mismatch; not run: "
                                        + ", ".join(left))
                    say("  " + runner.notes[-1])
    finally:
        if setup is not None:
            setup.remove()
    ref = originals[first]
    done = [o for o in orders if o in rows]
    launches = tuple((o, len(got[o].launches)) for o in done if got[o].error is None)
    fused_counts = next((Counters.of(got[o].launches) for o, _ in launches), None)
    prep = _prepare_counters(original, fused, ref, next((got[o] for o, _ in launches), None))
    return VerifyReport(tuple(r for o in done for r in rows[o]),
                        tuple((o, faults[o]) for o in done if o in faults), seed, tuple(orders),
                        exact, check_bounds, tuple(names), rule, len(ref.launches), launches,
                        time.perf_counter() - t0, tuple(o for o in original_orders
                                                        if o in originals),
                        tuple(dependent.values()), Counters.of(ref.launches), fused_counts,
                        prep, seen.compared, seen.skipped, tuple(runner.notes),
                        runner.workers, tuple(o for o in orders if o not in rows),
                        (ref, got.get(orders[0])) if keep else None,
                        tuple((o, got[o].replayed) for o, _ in launches if got[o].replayed),
                        tuple(sorted(setup.kernels)) if setup is not None else (),
                        tuple(sorted(why_not.items())))


def _prepare_counters(original, fused, ref, run):
    """The executor's sums over the prepare part's launches (original, fused), or None when
    the fused program has no prepare part (sirius/fusion/plan/prepare.py)."""
    prepare = getattr(fused, "prepare", None)
    if prepare is None or not prepare.launches:
        return None
    fused_prep = {i for i, op in enumerate(fused.host.launches()) if op.prepare}
    ours = prepare.launch_indices  # the original's launches, as its host numbers them

    def part(launches, which):
        return Counters.of(r for r in launches if r.launch_index in which)

    return (part(ref.launches, ours),
            part(run.launches, fused_prep) if run is not None else None)


def _row(order: str, name: str, want: np.ndarray, have: np.ndarray | None, exact: bool,
         reference: str, checkable: bool, through=(), kept: int = 0) -> VerifyRow:
    """The fused run's `have` against the original run's `want` (a buffer missing from the
    fused run is always blamed). `through`: the versions `have` was read back from; `kept`:
    elements where a version's unchanged initial contents were taken as the original's."""
    if have is None:
        if through:
            missing = "a version of it is missing in the fused run"
            return VerifyRow(order, name, want.dtype.name, want.size, None, None, None, False,
                             tol_text(want, exact), False, missing, reference)
        return VerifyRow(order, name, want.dtype.name, want.size, None, None, None, False,
                         tol_text(want, exact), False, "missing in the fused run", reference)
    c = compare(have, want, exact=exact)
    return VerifyRow(order, name, want.dtype.name, c.elements, c.mismatches, c.max_abs,
                     c.max_rel, c.bitwise, c.tolerance, c.ok, c.message, reference, checkable,
                     c.first_index, c.first_got, c.first_want,
                     tuple(n for n, _, _ in through), kept)


def _order_dependence(a, b, names: list[str], exact: bool) -> list[OrderDependence]:
    """The compared buffers whose final contents differ between two runs of the original."""
    out = []
    for name, want in _wanted(a, names):
        other = b.final.get(name)
        if other is None:
            continue
        c = compare(other, want, exact=exact)
        if not c.ok:
            out.append(OrderDependence(name, c.elements, c.mismatches, c.first_index,
                                       c.first_want, c.first_got))
    return out


def _one_line(e) -> str:
    """A SiriusError, or a run's error tuple (message, location, notes), on one line."""
    message, loc, notes = e if isinstance(e, tuple) else (e.message, e.loc, e.notes)
    head = f"{loc}: " if loc else ""
    return head + "; ".join((message, *notes))


def _wanted(ref, names: list[str]):
    for n in names:
        if n in ref.final:
            yield n, ref.final[n]
