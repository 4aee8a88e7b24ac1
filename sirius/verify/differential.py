"""Differential verification of a fused program: run the original once (forward order, the
reference) and the fused program under several block/thread orders on the CPU executor, with the
same seeded inputs, and compare what they leave in the observable buffers (docs/verify.md).

```python
rep = verify_fused(original, fused, seed=7, orders=("forward", "reverse", "random:1"))
rep.ok; rep.rows; print(rep.render()); rep.to_json()
```

`original` has `.program` (device_ir, device_module, files), `.kernels` (KernelInfo) and `.host`
(HostProgram); `fused` has `.device_ir` and `.host`, optionally `.kernels` and `.device_module`.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sirius.analysis.host.model import Copy, DevRef, HostProgram, Loop, Rotating
from sirius.diagnostics import SiriusError

ORDERS = ("forward", "reverse", "random:1")
# (rtol, atol) by float dtype: |got - ref| <= atol + rtol * |ref|. float32 as the issue fixes it;
# float64 the same (fusion changes contraction, not precision); float16 one ulp near 1.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5), "float32": (1e-5, 1e-6), "float64": (1e-5, 1e-6)}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One array against its reference."""

    elements: int
    mismatches: int
    max_abs: float
    max_rel: float
    bitwise: bool
    tolerance: str  # "bitwise" or "rtol=1e-05 atol=1e-06"
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and not self.message


@dataclass(frozen=True, slots=True)
class VerifyRow:
    """One (order, output buffer) of the fused run against the reference. `error` is set when the
    buffer could not be compared (the fused run faulted, or does not have the buffer); the
    numbers are then None."""

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

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in self.__slots__}
        for k in ("max_abs", "max_rel"):
            v = out[k]
            if v is not None and not math.isfinite(v):
                out[k] = str(v)  # JSON has no inf / nan
        return out


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

    @property
    def ok(self) -> bool:
        return not self.faults and all(r.ok for r in self.rows)

    def failed(self) -> list[VerifyRow]:
        return [r for r in self.rows if not r.ok]

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "seed": self.seed, "orders": list(self.orders), "exact": self.exact,
            "check_bounds": self.check_bounds, "outputs": list(self.outputs),
            "output_rule": self.output_rule, "tolerance": tolerance_text(self.exact),
            "reference_launches": self.reference_launches,
            "fused_launches": dict(self.fused_launches),
            "faults": [{"order": o, "message": m} for o, m in self.faults],
            "rows": [r.to_json() for r in self.rows], "seconds": round(self.seconds, 3),
        }

    def render(self) -> str:
        try:
            return self._render_rich()
        except ImportError:  # pragma: no cover - rich is a dependency, but stay usable without
            return self._render_plain()

    def _cells(self, r: VerifyRow) -> list[str]:
        if r.error:
            return [r.order, r.buffer, r.dtype, str(r.elements), "-", "-", "-", "-",
                    r.tolerance, "FAIL: " + r.error]
        return [r.order, r.buffer, r.dtype, str(r.elements), str(r.mismatches),
                _num(r.max_abs), _num(r.max_rel), "yes" if r.bitwise else "no", r.tolerance,
                "ok" if r.ok else "FAIL"]

    def _header(self) -> list[str]:
        return ["order", "buffer", "dtype", "elements", "mismatches", "max abs", "max rel",
                "bitwise", "tolerance", "result"]

    def _summary(self) -> list[str]:
        fused = ", ".join(f"{o}: {n}" for o, n in self.fused_launches) or "none completed"
        lines = [f"reference: original, forward order, {self.reference_launches} launches; "
                 f"fused launches: {fused}",
                 f"seed {self.seed}; compared: {self.output_rule}; "
                 f"check bounds: {'on' if self.check_bounds else 'off'}",
                 f"tolerance: {tolerance_text(self.exact)}"]
        lines += [f"fault ({o}): {m}" for o, m in self.faults]
        bad = len(self.failed())
        lines.append("verdict: OK, the fused program computes what the original does" if self.ok
                     else f"verdict: NOT OK ({bad} of {len(self.rows)} rows differ"
                          f"{', ' + str(len(self.faults)) + ' faulted runs' if self.faults else ''}"
                          ")")
        return lines

    def _render_rich(self) -> str:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="fused vs original")
        for h in self._header():
            table.add_column(h, justify="right" if h in ("elements", "mismatches", "max abs",
                                                         "max rel") else "left")
        for r in self.rows:
            cells = self._cells(r)
            table.add_row(*cells, style=None if r.ok else "red")
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


def tolerance_text(exact: bool) -> str:
    if exact:
        return "every buffer bitwise equal (exact)"
    return ("ints bitwise; floats bitwise or |got-ref| <= atol + rtol*|ref| "
            "(f32/f64: rtol 1e-5 atol 1e-6; f16: rtol 1e-3 atol 1e-5); NaN == NaN")


def compare(got: np.ndarray, ref: np.ndarray, *, exact: bool = False) -> Comparison:
    """Compare `got` with the reference `ref` element by element (the rule in docs/verify.md)."""
    got, ref = np.asarray(got).reshape(-1), np.asarray(ref).reshape(-1)
    tol = None if exact else TOLERANCES.get(ref.dtype.name)
    tol_text = _tol_text(ref, exact)
    if got.dtype != ref.dtype or got.size != ref.size:
        return Comparison(ref.size, ref.size, math.inf, math.inf, False, tol_text,
                          f"got {got.size} x {got.dtype}, expected {ref.size} x {ref.dtype}")
    bits_equal = got.view(np.uint8) == ref.view(np.uint8)
    same = bits_equal.reshape(ref.size, -1).all(axis=1) if ref.size else bits_equal
    bitwise = bool(same.all())
    if ref.dtype.kind == "f":
        g, r = got.astype(np.float64), ref.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(r)
        finite = np.isfinite(g) & np.isfinite(r)
        # a NaN or infinity must be matched exactly; finite values differ by |got - ref|
        with np.errstate(invalid="ignore"):
            diff = np.where(finite, np.abs(g - r), np.where(both_nan | (g == r), 0.0, math.inf))
        tiny = float(np.finfo(ref.dtype).tiny)
        scale = np.where(np.isfinite(r), np.maximum(np.abs(r), tiny), 1.0)
        good = same | both_nan
        if tol is not None:
            rtol, atol = tol
            good |= finite & (diff <= atol + rtol * np.abs(np.where(finite, r, 0.0)))
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        diff = np.abs(g - r)
        scale = np.maximum(np.abs(r), 1.0)
        good = same
    with np.errstate(invalid="ignore"):
        rel = diff / scale
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    return Comparison(ref.size, int((~good).sum()), max_abs, max_rel, bitwise, tol_text)


# which buffers are observable --------------------------------------------------------------------

def _walk(ops):
    for op in ops:
        if isinstance(op, Loop):
            yield from _walk(op.body)
        else:
            yield op


def _refs(addr) -> list[DevRef]:
    if isinstance(addr, Rotating):
        return [c for c in addr.choices if isinstance(c, DevRef)]
    return [addr] if isinstance(addr, DevRef) else []


def observed(host: HostProgram) -> tuple[list[str], str]:
    """(device buffers, rule) that verification compares, by their final contents: buffers with
    role output plus every source of a device-to-host copy (both choices of a rotating one);
    when the program has none, every buffer."""
    names = [b.name for b in host.buffers if b.role == "output"]
    for op in _walk(host.ops):
        if isinstance(op, Copy) and op.kind == "D2H":
            names += [r.buffer for r in _refs(op.src)]
    names = list(dict.fromkeys(names))
    if not names:
        return [b.name for b in host.buffers], "all buffers (the program copies none back)"
    return names, "outputs (role output or copied device-to-host)"


# running ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ProgramLike:
    device_ir: str
    device_module: object
    files: tuple


def _fused_program(original, fused) -> _ProgramLike:
    module = getattr(fused, "device_module", None)
    if module is None:
        import llvmlite.binding as llvm

        module = llvm.parse_assembly(fused.device_ir)
    files = getattr(fused, "files", None) or original.program.files
    return _ProgramLike(fused.device_ir, module, tuple(files))


def _run(host, program, kernels, order: str, seed: int, check_bounds: bool, dtypes=None):
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    dev = CpuDevice(order=order, seed=seed, check_bounds=check_bounds)
    return run_host_program(host, program, kernels, dev, seed=seed, order=order, dtypes=dtypes)


def verify_fused(original, fused, *, seed: int = 7, orders: Sequence[str] = ORDERS,
                 exact: bool = False, check_bounds: bool = True,
                 progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Run `original` once (forward order, no bounds checks: the reference) and `fused` under
    every order of `orders` on the same seeded inputs, and compare the observable buffers.
    An error of the fused run (a KernelFault: out of bounds, divergent barrier; any other
    SiriusError) is a mismatch, not an exception; an error of the original is raised (the
    reference must run). `exact` demands bitwise equality of floats too; `check_bounds` runs
    the fused program with the executor's bounds checks."""
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    say(f"running the original program (forward order, seed {seed})")
    ref = _run(original.host, original.program, original.kernels, "forward", seed, False)
    names, rule = observed(original.host)
    prog = _fused_program(original, fused)
    kernels = getattr(fused, "kernels", None) or original.kernels
    rows: list[VerifyRow] = []
    faults: list[tuple[str, str]] = []
    launches: list[tuple[str, int]] = []
    for order in orders:
        checked = ", bounds checked" if check_bounds else ""
        say(f"running the fused program ({order} order{checked})")
        try:
            got = _run(fused.host, prog, kernels, order, seed, check_bounds, dtypes=ref.dtypes)
        except SiriusError as e:  # KernelFault: out of bounds, divergent barrier, ...
            msg = _one_line(e)
            faults.append((order, msg))
            say(f"  {order}: the fused run faulted: {msg}")
            for name, want in _wanted(ref, names):
                rows.append(VerifyRow(order, name, want.dtype.name, want.size, None, None, None,
                                      False, _tol_text(want, exact), False, "the run faulted"))
            continue
        launches.append((order, len(got.launches)))
        bad = 0
        for name, want in _wanted(ref, names):
            have = got.final.get(name)
            if have is None:
                rows.append(VerifyRow(order, name, want.dtype.name, want.size, None, None, None,
                                      False, _tol_text(want, exact), False,
                                      "missing in the fused run"))
                bad += 1
                continue
            c = compare(have, want, exact=exact)
            rows.append(VerifyRow(order, name, want.dtype.name, c.elements, c.mismatches,
                                  c.max_abs, c.max_rel, c.bitwise, c.tolerance, c.ok, c.message))
            bad += not c.ok
        say(f"  {order}: " + (f"{bad} of {len(names)} buffers differ" if bad else "ok"))
    return VerifyReport(tuple(rows), tuple(faults), seed, tuple(orders), exact, check_bounds,
                        tuple(names), rule,
                        len(ref.launches), tuple(launches), time.perf_counter() - t0)


def _one_line(e: SiriusError) -> str:
    head = f"{e.loc}: " if e.loc else ""
    return head + "; ".join((e.message, *e.notes))


def _tol_text(a: np.ndarray, exact: bool) -> str:
    tol = TOLERANCES.get(a.dtype.name)
    return "bitwise" if exact or tol is None else f"rtol={tol[0]:g} atol={tol[1]:g}"


def _wanted(ref, names: list[str]):
    for n in names:
        if n in ref.final:
            yield n, ref.final[n]
