"""Calibrating the cost model's constants from GPU measurements (`sirius tune --calibrate
RUNS.json`, docs/tune.md).

RUNS.json (schema `sirius-runs/1`) lists measured times, each of one launch or of several
launches of one kernel (their sum), with the launches' counts: written by `sirius tune` when it
measures (DIR/runs.json), or by hand, or pointing into a tune.json's `launch_estimates`.

The fit. Five constants are fitted, relative to the GPU table entry the counts are costed
with: the launch overhead L (seconds per launch), the effective DRAM bandwidth (the table's
divided by u), the issue-rate factor f = 1/v (the achieved fraction of the table's issue
rate), and a megakernel's cost per grid barrier S_g and per dependence wait S_w (model.py's
grid_sync_us and wait_us: one per segment edge). A measurement of launches i is predicted as

    sum over i of  L + max(u x DRAM_i, compute_i, v x issue_i) + S_g x G_i + S_w x W_i

(G_i, W_i: launch i's grid barriers and waits; a megakernel launch's max is taken segment by
segment and added up, as the model does)

with DRAM_i, compute_i and issue_i the model's terms at the table's rates (model.py). For a
fixed assignment of each launch to its largest term this is linear in (L, u, v, S_g, S_w), and it is
solved by least squares (numpy.linalg.lstsq) on relative residuals (each row divided by the
measured time, so a 2 us launch and a 2 ms launch weigh the same). The assignment is then
recomputed with the new constants and the fit repeated until the assignment does not change
(a fixed point of the piecewise-linear model), from several starting points; the constants
with the smallest residual win. A constant no launch is bound by cannot be seen in the data:
it keeps its value before and the calibration says so. The compute peaks and the occupancy
and wave rules are not fitted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from sirius.diagnostics import SiriusError
from sirius.tune.gpus import Gpu
from sirius.tune.model import Assumptions, LaunchCounts, estimate, segment_syncs

SCHEMA = "sirius-runs/1"
# a measurement's "kernel" when it times the launches of several kernels together (a whole
# program's device work, e.g. one CUDA-graph replay): the fit sums their predictions as always
WHOLE = "*"
CONSTANTS = ("launch_us", "dram_gbps", "issue_rate_factor", "grid_sync_us", "wait_us")
_TERM_OF = {"dram_gbps": "dram", "issue_rate_factor": "issue"}


# RUNS.json ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    """A measured time of `counts` (one launch, or several launches of one kernel, summed)."""

    kernel: str
    seconds: float
    counts: tuple[LaunchCounts, ...]
    label: str  # where it came from, for the residual table


@dataclass(frozen=True)
class Runs:
    path: str
    gpu: str | None      # the table entry the counts are costed with (None: not said)
    device: str          # what measured them (informational)
    method: str
    measurements: tuple[Measurement, ...]


def load_runs(path: str | Path) -> Runs:
    """Read and check a RUNS.json; every problem is a SiriusError naming the field."""
    p = Path(path)
    where = f"--calibrate {p}"
    try:
        doc = json.loads(p.read_text())
    except OSError as e:
        raise SiriusError(f"{where}: cannot read it: {e.strerror or e}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SiriusError(f"{where}: not a JSON file: {e}") from e
    if not isinstance(doc, dict):
        raise SiriusError(f"{where}: the top level must be an object with \"schema\": "
                          f"\"{SCHEMA}\" and \"measurements\"")
    if doc.get("schema") != SCHEMA:
        raise SiriusError(f"{where}: \"schema\" must be \"{SCHEMA}\", not "
                          f"{doc.get('schema')!r} (docs/tune.md describes the file)")
    gpu_name = doc.get("gpu")
    if gpu_name is not None:
        from sirius.tune.gpus import gpu as find_gpu

        if not isinstance(gpu_name, str):
            raise SiriusError(f"{where}: \"gpu\" must be a GPU table name, not {gpu_name!r}")
        try:
            gpu_name = find_gpu(gpu_name).name
        except SiriusError as e:
            raise SiriusError(f"{where}: \"gpu\": {e.message}") from e
    ms = doc.get("measurements")
    if not isinstance(ms, list) or not ms:
        raise SiriusError(f"{where}: \"measurements\" must be a non-empty list")
    tunes: dict[Path, dict] = {}
    out = [_measurement(m, f"{where}: measurements[{i}]", p.parent, tunes)
           for i, m in enumerate(ms)]
    return Runs(str(p), gpu_name, str(doc.get("device", "")), str(doc.get("method", "")),
                tuple(out))


def _measurement(m: object, where: str, base: Path, tunes: dict[Path, dict]) -> Measurement:
    if not isinstance(m, dict):
        raise SiriusError(f"{where}: must be an object, not {type(m).__name__}")
    kernel = m.get("kernel")
    if not isinstance(kernel, str) or not kernel:
        raise SiriusError(f"{where}: \"kernel\" must be the kernel's name")
    t = m.get("measured_us")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise SiriusError(f"{where}: \"measured_us\" must be a positive number of "
                          f"microseconds, not {t!r}")
    if ("launches" in m) == ("from" in m):
        raise SiriusError(f"{where}: give either \"launches\" (the counts of each launch) or "
                          "\"from\" (a reference into a tune.json), not both or neither")
    if "launches" in m:
        ls = m["launches"]
        if not isinstance(ls, list) or not ls:
            raise SiriusError(f"{where}: \"launches\" must be a non-empty list of counts")
        counts = tuple(LaunchCounts.from_json(c, f"{where}.launches[{j}]")
                       for j, c in enumerate(ls))
    else:
        counts = _from_tune(m["from"], f"{where}.from", base, tunes)
    for c in counts:
        if c.kernel != kernel and kernel != WHOLE:
            raise SiriusError(f"{where}: \"kernel\" is {kernel!r} but a launch it measures is "
                              f"of {c.kernel!r} (\"*\" measures the launches of several "
                              "kernels together)")
    label = str(m.get("label") or m.get("variant") or kernel)
    return Measurement(kernel, float(t) * 1e-6, counts, label)


def _from_tune(ref: object, where: str, base: Path, tunes: dict[Path, dict]
               ) -> tuple[LaunchCounts, ...]:
    """The counts of launches of a tune.json variant: {"tune_json": path (relative to the
    RUNS.json), "variant": label, "launches": [indices into its launch_estimates]}."""
    if not isinstance(ref, dict) or not isinstance(ref.get("tune_json"), str) \
            or not isinstance(ref.get("variant"), str):
        raise SiriusError(f"{where}: must be {{\"tune_json\": PATH, \"variant\": LABEL, "
                          "\"launches\": [INDEX, ...]}")
    path = (base / ref["tune_json"]).resolve()
    if path not in tunes:
        try:
            tunes[path] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SiriusError(f"{where}: cannot read {path} as JSON: {e}") from e
    doc = tunes[path]
    found = [v for v in [doc.get("baseline")] + list(doc.get("variants") or [])
             if isinstance(v, dict) and v.get("label") == ref["variant"]]
    if not found or not isinstance(found[0].get("launch_estimates"), list):
        raise SiriusError(f"{where}: {path} has no variant {ref['variant']!r} with launch "
                          "estimates")
    les = found[0]["launch_estimates"]
    idx = ref.get("launches")
    if not isinstance(idx, list) or not idx or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in idx):
        raise SiriusError(f"{where}: \"launches\" must be a non-empty list of launch indices")
    out = []
    for i in idx:
        if not 0 <= i < len(les):
            more = " (tune.json keeps the first 200)" if found[0].get(
                "launch_estimates_truncated") else ""
            raise SiriusError(f"{where}: launch {i} is not among the {len(les)} launch "
                              f"estimates of {ref['variant']!r}{more}")
        out.append(LaunchCounts.from_json(les[i].get("counts"), f"{where} launch {i}"))
    return tuple(out)


def runs_json(gpu: Gpu, device: str, method: str,
              variants: list[tuple[str, tuple[LaunchCounts, ...], object]],
              max_per_variant: int = 200) -> dict:
    """A RUNS.json of measured variants: (label, counts per launch, measure.Measured), one
    measurement per launch whose measured kernel is the counted one."""
    ms = []
    for label, counts, m in variants:
        ls = getattr(m, "launches", ())
        if len(ls) != len(counts) or any(a.kernel != c.kernel for a, c in zip(ls, counts,
                                                                                strict=True)):
            continue
        for i, (lt, c) in enumerate(list(zip(ls, counts, strict=True))[:max_per_variant]):
            ms.append({"kernel": c.kernel, "label": f"{label}: launch {i} ({c.kernel})",
                       "variant": label, "measured_us": lt.median_s * 1e6,
                       "p10_us": lt.p10_s * 1e6, "p90_us": lt.p90_s * 1e6,
                       "launches": [c.to_json()]})
    return {"schema": SCHEMA, "gpu": gpu.name, "device": device, "method": method,
            "measurements": ms}


# the constants -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Constants:
    launch_us: float
    dram_gbps: float
    issue_rate_factor: float
    grid_sync_us: float = Assumptions().grid_sync_us  # a megakernel's grid barrier
    wait_us: float = Assumptions().wait_us            # and dependence wait

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in CONSTANTS}


def constants_of(gpu: Gpu, a: Assumptions) -> Constants:
    return Constants(gpu.launch_us, gpu.dram_gbps, a.issue_rate_factor, a.grid_sync_us,
                     a.wait_us)


def with_constants(gpu: Gpu, a: Assumptions, c: Constants, source: str
                   ) -> tuple[Gpu, Assumptions]:
    """`gpu` and `a` with the constants `c`; the sources of the two GPU figures say `source`."""
    src = dict(gpu.sources)
    src["launch_us"] = f"{source}: {c.launch_us:.4g} us (before: {src.get('launch_us', '')})"
    src["dram_gbps"] = (f"{source}: effective {c.dram_gbps:.4g} GB/s (the table's "
                        f"{gpu.dram_gbps:g} GB/s)")
    g = replace(gpu, launch_us=c.launch_us, dram_gbps=c.dram_gbps, sources=tuple(src.items()))
    return g, replace(a, issue_rate_factor=c.issue_rate_factor, grid_sync_us=c.grid_sync_us,
                      wait_us=c.wait_us)


# the fit -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Residual:
    label: str
    kernel: str
    launches: int
    measured: float   # seconds
    before: float     # the model's prediction with the constants before
    after: float      # and after

    @property
    def error_before(self) -> float:
        return (self.before - self.measured) / self.measured

    @property
    def error_after(self) -> float:
        return (self.after - self.measured) / self.measured

    def to_json(self) -> dict:
        return {"label": self.label, "kernel": self.kernel, "launches": self.launches,
                "measured_s": self.measured, "estimate_before_s": self.before,
                "estimate_after_s": self.after, "relative_error_before": self.error_before,
                "relative_error_after": self.error_after}


@dataclass(frozen=True)
class Calibration:
    path: str
    gpu: str                              # the table entry the constants belong to
    before: Constants
    after: Constants
    not_fitted: dict[str, str]            # constant -> why it kept its value
    residuals: tuple[Residual, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def fitted(self) -> tuple[str, ...]:
        return tuple(k for k in CONSTANTS if k not in self.not_fitted)

    def rms(self, when: str) -> float:
        errs = [getattr(r, f"error_{when}") for r in self.residuals]
        return float(np.sqrt(np.mean(np.square(errs)))) if errs else 0.0

    def apply(self, gpu: Gpu, a: Assumptions) -> tuple[Gpu, Assumptions]:
        return with_constants(gpu, a, self.after,
                              f"calibrated from {self.path} ({len(self.residuals)} "
                              "measurements)")

    def to_json(self) -> dict:
        return {"runs": self.path, "gpu": self.gpu, "before": self.before.to_json(),
                "after": self.after.to_json(), "fitted": list(self.fitted),
                "not_fitted": dict(self.not_fitted),
                "rms_relative_error_before": self.rms("before"),
                "rms_relative_error_after": self.rms("after"),
                "residuals": [r.to_json() for r in self.residuals], "notes": list(self.notes)}


@dataclass(frozen=True)
class _Row:
    """One measurement at the table's rates: per launch (DRAM, compute, issue) terms, and the
    grid barriers and dependence waits of its megakernel launches."""

    m: Measurement
    # shape (parts, 3): DRAM at the table's bandwidth, compute, issue (f=1), one row per plain
    # launch and one per segment of a megakernel launch (the model adds each one's largest)
    terms: np.ndarray
    launches: int
    syncs: tuple[int, int] = (0, 0)  # grid barriers, dependence waits (one per segment edge)


_DRAM, _COMPUTE, _ISSUE = 0, 1, 2
_NPAR = 5  # theta = (L, u, v, S_grid, S_wait), seconds for L and the S


def _predict(rows: list[_Row], theta: np.ndarray) -> np.ndarray:
    """Predicted seconds per measurement for theta = (L, u, v, S_grid, S_wait)."""
    scale = np.array([theta[1], 1.0, theta[2]])
    return np.array([r.launches * theta[0] + (r.terms * scale).max(axis=1).sum()
                     + r.syncs[0] * theta[3] + r.syncs[1] * theta[4] for r in rows])


def _objective(rows: list[_Row], theta: np.ndarray, t: np.ndarray) -> float:
    return float(np.sum(((_predict(rows, theta) - t) / t) ** 2))


def _solve(rows: list[_Row], theta: np.ndarray, t: np.ndarray, anchor: np.ndarray
           ) -> tuple[np.ndarray, list[int]]:
    """One least-squares step for the assignment `theta` induces: the new theta and the
    parameters it fitted. A term no launch is bound by, or whose fit is not positive, takes
    its value in `anchor` (the constants before); a negative launch overhead becomes 0."""
    scale = np.array([theta[1], 1.0, theta[2]])
    cols = np.zeros((_NPAR, len(rows)))
    rhs = t.copy()
    for k, r in enumerate(rows):
        bound = (r.terms * scale).argmax(axis=1)
        cols[0, k] = r.launches
        cols[1, k] = r.terms[bound == _DRAM, _DRAM].sum()
        cols[2, k] = r.terms[bound == _ISSUE, _ISSUE].sum()
        cols[3, k], cols[4, k] = r.syncs
        rhs[k] -= r.terms[bound == _COMPUTE, _COMPUTE].sum()
    new = anchor.copy()
    free = [p for p in range(_NPAR) if cols[p].any()]
    while free:
        fixed = [p for p in range(_NPAR) if p not in free]
        b = rhs - cols[fixed].T @ new[fixed]
        x = cols[free].T / t[:, None]
        sol, _, rank, _ = np.linalg.lstsq(x, b / t, rcond=None)
        if rank < len(free):  # not identifiable: drop the term seen in the fewest rows
            worst = min((p for p in free if p), key=lambda p: np.count_nonzero(cols[p]),
                        default=None)
            if worst is None:
                break
            free.remove(worst)
            continue
        bad = [p for p, v in zip(free, sol, strict=True) if v < 0 or (p and v == 0)]
        if not bad:
            new[free] = sol
            return new, free
        if bad[0] == 0:
            new[0] = 0.0
        free.remove(bad[0])
    return new, free


def _fixed_point(rows: list[_Row], theta: np.ndarray, t: np.ndarray, anchor: np.ndarray
                 ) -> tuple[np.ndarray, list[int], float]:
    """Alternate assignment and least squares from `theta` until the assignment is stable:
    the best theta seen (smallest relative residual), the parameters it fitted, its
    residual."""
    best: tuple[np.ndarray, list[int], float] | None = None
    for _ in range(100):
        new, free = _solve(rows, theta, t, anchor)
        obj = _objective(rows, new, t)
        if best is None or obj < best[2]:
            best = (new, free, obj)
        if np.allclose(new, theta, rtol=1e-12, atol=0):
            break
        theta = new
    assert best is not None
    return best


def fit(runs: Runs, gpu: Gpu, a: Assumptions) -> Calibration:
    """Fit launch overhead, effective DRAM bandwidth and the issue-rate factor of `gpu` to
    `runs` (module doc); the calibration holds the constants before and after."""
    base = replace(a, issue_rate_factor=1.0)
    rows, notes = [], []
    for m in runs.measurements:
        es = [estimate(c, gpu, base) for c in m.counts]
        if any(math.isinf(e.seconds) for e in es):
            notes.append(f"{m.label}: left out: a launch cannot run on {gpu.name} (its block "
                         "does not fit on an SM)")
            continue
        ng = sum(segment_syncs(c) for c in m.counts if c.sync == "grid")
        nw = sum(segment_syncs(c) for c in m.counts if c.sync != "grid")
        parts = [p for e in es for p in (e.segments or [(e.dram, e.compute, e.issue)])]
        rows.append(_Row(m, np.array(parts), len(es), (ng, nw)))
    if not rows:
        raise SiriusError(f"--calibrate {runs.path}: no measurement can be estimated on "
                          f"{gpu.name}")
    t = np.array([r.m.seconds for r in rows])
    before = constants_of(gpu, a)
    theta0 = np.array([before.launch_us * 1e-6, 1.0, 1.0 / before.issue_rate_factor,
                       before.grid_sync_us * 1e-6, before.wait_us * 1e-6])
    best, best_free, best_obj = theta0, list(range(_NPAR)), math.inf
    for du in (1.0, 0.5, 2.0, 4.0):  # starting points: the assignment is found iteratively
        for dv in (1.0, 0.5, 2.0, 4.0):
            theta, free, obj = _fixed_point(rows, theta0 * np.array([1.0, du, dv, 1.0, 1.0]),
                                            t, theta0)
            if obj < best_obj:
                best, best_free, best_obj = theta, free, obj
    not_fitted = {}
    if 0 not in best_free:
        not_fitted["launch_us"] = "the fit gave a negative launch overhead: set to 0"
    for p, k, term in ((1, "dram_gbps", "DRAM bandwidth"),
                       (2, "issue_rate_factor", "instruction issue")):
        if p not in best_free:
            not_fitted[k] = (f"no measured launch is bound by {term} (or its fit was not "
                             "positive): kept")
    for p, k, what in ((3, "grid_sync_us", "grid megakernel"),
                       (4, "wait_us", "counters megakernel")):
        if p not in best_free:
            not_fitted[k] = f"no measured {what} (or its fit was not positive): kept"
    if len(rows) < len(CONSTANTS) - len(not_fitted):
        notes.append(f"only {len(rows)} measurement(s) for {len(CONSTANTS) - len(not_fitted)} "
                     "constants: the fit passes through them exactly")
    after = Constants(float(best[0]) * 1e6, gpu.dram_gbps / float(best[1]),
                      1.0 / float(best[2]), float(best[3]) * 1e6, float(best[4]) * 1e6)
    g_after, a_after = with_constants(gpu, a, after, "calibrated")
    residuals = tuple(
        Residual(r.m.label, r.m.kernel, len(r.m.counts), r.m.seconds,
                 sum(estimate(c, gpu, a).seconds for c in r.m.counts),
                 sum(estimate(c, g_after, a_after).seconds for c in r.m.counts))
        for r in rows)
    return Calibration(runs.path, gpu.name, before, after, not_fitted, residuals, tuple(notes))
