"""`--calibrate RUNS.json`: the fit recovers constants that generated synthetic measurements,
RUNS.json is checked field by field, and the CLI says what is wrong with exit status 2 before
it compiles anything."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sirius.cli import main
from sirius.diagnostics import SiriusError
from sirius.tune.calibrate import (
    SCHEMA,
    Constants,
    Measurement,
    Runs,
    fit,
    load_runs,
    with_constants,
)
from sirius.tune.gpus import gpu
from sirius.tune.model import Assumptions, LaunchCounts, Segment, estimate

ROOT = Path(__file__).resolve().parents[2]
CHAIN = str(ROOT / "kernels" / "elementwise_chain.cu")
H100 = gpu("H100 SXM")


def launches(n: int = 40, seed: int = 3) -> list[LaunchCounts]:
    """Launches of every kind: tiny (launch-bound), DRAM-bound (many bytes, few
    instructions) and issue-bound (many instructions, few bytes), on grids of every size."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        kind = i % 3
        grid = int(rng.choice([1, 16, 132, 1056, 8448]))
        block = int(rng.choice([64, 128, 256]))
        dram = int(rng.uniform(1e3, 1e4) if kind == 0 else rng.uniform(1e7, 4e8)
                   if kind == 1 else rng.uniform(1e4, 1e5))
        instr = int(rng.uniform(1e3, 1e4) if kind == 0 else rng.uniform(1e5, 1e6)
                    if kind == 1 else rng.uniform(1e9, 4e10))
        out.append(LaunchCounts(f"k{i}", f"k{i}", (grid, 1, 1), (block, 1, 1), 0, instr, dram,
                                (), 32, 0))
    return out


def synthetic(true: Constants, noise: float = 0.0, per_kernel: bool = False) -> Runs:
    g, a = with_constants(H100, Assumptions(), true, "truth")
    rng = np.random.default_rng(11)
    cs = launches()
    groups = [cs[i:i + 2] for i in range(0, len(cs), 2)] if per_kernel else [[c] for c in cs]
    ms = []
    for grp in groups:
        grp = [replace(c, kernel=grp[0].kernel) for c in grp]  # one kernel per measurement
        t = sum(estimate(c, g, a).seconds for c in grp) * (1 + noise * rng.standard_normal())
        ms.append(Measurement(grp[0].kernel, t, tuple(grp), grp[0].kernel))
    return Runs("synthetic", H100.name, "", "", tuple(ms))


@pytest.mark.parametrize("per_kernel", [False, True])
def test_the_fit_recovers_the_constants_that_made_the_data(per_kernel):
    true = Constants(launch_us=5.5, dram_gbps=2400.0, issue_rate_factor=0.45)
    cal = fit(synthetic(true, per_kernel=per_kernel), H100, Assumptions())
    assert cal.before == Constants(3.0, 3350.0, 1.0)
    assert cal.fitted == ("launch_us", "dram_gbps", "issue_rate_factor")
    assert set(cal.not_fitted) == {"grid_sync_us", "wait_us"}  # no megakernel measured
    assert cal.after.launch_us == pytest.approx(5.5, rel=1e-6)
    assert cal.after.dram_gbps == pytest.approx(2400.0, rel=1e-6)
    assert cal.after.issue_rate_factor == pytest.approx(0.45, rel=1e-6)
    assert cal.rms("after") < 1e-9 < 0.05 < cal.rms("before")
    # the calibrated model predicts what the fit predicted
    g, a = cal.apply(H100, Assumptions())
    for r in cal.residuals:
        c = next(m for m in synthetic(true, per_kernel=per_kernel).measurements
                 if m.label == r.label).counts
        assert sum(estimate(x, g, a).seconds for x in c) == pytest.approx(r.after)
    assert "calibrated from synthetic" in dict(g.sources)["launch_us"]


def test_the_fit_with_noise_stays_close():
    true = Constants(launch_us=4.0, dram_gbps=3000.0, issue_rate_factor=0.7)
    cal = fit(synthetic(true, noise=0.03), H100, Assumptions())
    assert cal.after.launch_us == pytest.approx(4.0, rel=0.05)
    assert cal.after.dram_gbps == pytest.approx(3000.0, rel=0.05)
    assert cal.after.issue_rate_factor == pytest.approx(0.7, rel=0.05)
    assert 0.01 < cal.rms("after") < 0.05


def test_whole_program_measurements_of_several_kernels(tmp_path):
    """`"kernel": "*"`: one time for the launches of several kernels (a CUDA-graph replay of
    a whole program); the fit recovers the constants from such sums too."""
    true = Constants(launch_us=1.5, dram_gbps=2800.0, issue_rate_factor=0.6)
    g, a = with_constants(H100, Assumptions(), true, "truth")
    cs = launches()
    ms = [Measurement("*", sum(estimate(c, g, a).seconds for c in cs[i:i + 4]),
                      tuple(cs[i:i + 4]), f"program {i}") for i in range(0, len(cs), 2)]
    cal = fit(Runs("whole", H100.name, "", "", tuple(ms)), H100, Assumptions())
    assert cal.after.launch_us == pytest.approx(1.5, rel=1e-6)
    assert cal.after.dram_gbps == pytest.approx(2800.0, rel=1e-6)
    # in RUNS.json: "*" takes launches of different kernels, a name takes only its own
    doc = {"schema": SCHEMA, "measurements": [
        {"kernel": "*", "measured_us": 9.0, "launches": [_counts("k0"), _counts("k1")]}]}
    (m,) = load_runs(_write(tmp_path, doc)).measurements
    assert m.kernel == "*" and [c.kernel for c in m.counts] == ["k0", "k1"]
    doc["measurements"][0]["kernel"] = "k0"
    with pytest.raises(SiriusError, match="a launch it measures is of 'k1'"):
        load_runs(_write(tmp_path, doc))


def _megakernel(sync: str, nseg: int, i: int) -> LaunchCounts:
    """A megakernel of `nseg` segments on 132 blocks, DRAM-bound and issue-bound in turn (the
    fit must take each segment's largest term, as the model does, not the sum's)."""
    dram = Segment(instructions=20_000 * (i + 1), dram_bytes=(1 << 22) * (i + 1))
    issue = Segment(instructions=(1 << 26) * (i + 1), dram_bytes=4096)
    segs = tuple(dram if k % 2 else issue for k in range(nseg))
    return LaunchCounts(f"mk{i}", f"mk{i}", (132, 1, 1), (256, 1, 1), 0,
                        sum(g.instructions for g in segs), sum(g.dram_bytes for g in segs), (),
                        32, 0, sync=sync, segments=segs)


def test_the_fit_recovers_barrier_and_wait_costs():
    """Measured megakernels give the cost of a grid barrier and of a dependence wait (the
    model's grid_sync_us and wait_us), next to the three constants of plain launches."""
    true = Constants(launch_us=2.2, dram_gbps=3000.0, issue_rate_factor=0.8,
                     grid_sync_us=1.6, wait_us=3.5)
    g, a = with_constants(H100, Assumptions(), true, "truth")
    cs = launches() + [_megakernel(sync, n, i) for i, (sync, n) in enumerate(
        [("grid", 2), ("grid", 9), ("grid", 33), ("counters", 3), ("counters", 17),
         ("counters", 40)])]
    ms = tuple(Measurement(c.kernel, estimate(c, g, a).seconds, (c,), c.kernel) for c in cs)
    cal = fit(Runs("mk", H100.name, "", "", ms), H100, Assumptions())
    assert cal.before.grid_sync_us == Assumptions().grid_sync_us
    assert cal.fitted == ("launch_us", "dram_gbps", "issue_rate_factor", "grid_sync_us",
                          "wait_us")
    assert cal.after.grid_sync_us == pytest.approx(1.6, rel=1e-6)
    assert cal.after.wait_us == pytest.approx(3.5, rel=1e-6)
    assert cal.after.launch_us == pytest.approx(2.2, rel=1e-6)
    assert cal.rms("after") < 1e-9
    # without megakernels the two keep their values, and say why
    plain = fit(Runs("p", H100.name, "", "", ms[:len(launches())]), H100, Assumptions())
    assert plain.after.grid_sync_us == Assumptions().grid_sync_us
    assert "no measured grid megakernel" in plain.not_fitted["grid_sync_us"]


def test_a_term_no_launch_is_bound_by_keeps_its_value():
    true = Constants(launch_us=6.0, dram_gbps=2000.0, issue_rate_factor=1.0)
    runs = synthetic(true)
    only_dram = Runs(runs.path, runs.gpu, "", "", tuple(
        m for m in runs.measurements if m.counts[0].instructions < 1e7))
    cal = fit(only_dram, H100, Assumptions())
    assert "issue_rate_factor" in cal.not_fitted and cal.after.issue_rate_factor == 1.0
    assert cal.after.launch_us == pytest.approx(6.0, rel=1e-6)
    assert cal.after.dram_gbps == pytest.approx(2000.0, rel=1e-6)


# RUNS.json ---------------------------------------------------------------------------------
def _counts(kernel: str = "k0") -> dict:
    return {"kernel": kernel, "grid": [132, 1, 1], "block": [256, 1, 1],
            "instructions": 10000, "dram_bytes": 1 << 20, "registers": 32}


def _write(tmp_path: Path, doc) -> Path:
    p = tmp_path / "runs.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_runs_json_with_counts_and_references(tmp_path):
    tune_dir = tmp_path / "t"
    tune_dir.mkdir()
    (tune_dir / "tune.json").write_text(json.dumps({
        "baseline": {"label": "original", "launch_estimates": [
            {"counts": _counts("scale")}, {"counts": _counts("add_bias")}]},
        "variants": []}))
    p = _write(tmp_path, {"schema": SCHEMA, "gpu": "h100", "measurements": [
        {"kernel": "k0", "measured_us": 7.5, "launches": [_counts(), _counts()]},
        {"kernel": "add_bias", "measured_us": 4,
         "from": {"tune_json": "t/tune.json", "variant": "original", "launches": [1]}}]})
    runs = load_runs(p)
    assert runs.gpu == "H100 SXM" and len(runs.measurements) == 2
    a, b = runs.measurements
    assert a.seconds == pytest.approx(7.5e-6) and len(a.counts) == 2
    assert b.counts[0].kernel == "add_bias" and b.counts[0].registers == 32


@pytest.mark.parametrize("doc, message", [
    ("{not json", "not a JSON file"),
    ([1, 2], "the top level must be an object"),
    ({"schema": "sirius-runs/0", "measurements": []}, '"schema" must be "sirius-runs/1"'),
    ({"schema": SCHEMA, "measurements": []}, '"measurements" must be a non-empty list'),
    ({"schema": SCHEMA, "gpu": "GTX 480", "measurements": [1]}, "unknown GPU 'GTX 480'"),
    ({"schema": SCHEMA, "measurements": [{"kernel": "k0", "measured_us": -1,
                                          "launches": [_counts()]}]},
     'measurements[0]: "measured_us" must be a positive number'),
    ({"schema": SCHEMA, "measurements": [{"kernel": "k0", "measured_us": 1}]},
     'give either "launches"'),
    ({"schema": SCHEMA, "measurements": [{"kernel": "k0", "measured_us": 1, "launches": [
        {**_counts(), "grid": [0, 1, 1]}]}]},
     "measurements[0].launches[0]: 'grid' must be a list of 3 positive integers"),
    ({"schema": SCHEMA, "measurements": [{"kernel": "k0", "measured_us": 1, "launches": [
        {k: v for k, v in _counts().items() if k != "instructions"}]}]},
     "missing 'instructions'"),
    ({"schema": SCHEMA, "measurements": [{"kernel": "k1", "measured_us": 1,
                                          "launches": [_counts()]}]},
     "\"kernel\" is 'k1' but a launch it measures is of 'k0'"),
    ({"schema": SCHEMA, "measurements": [{"kernel": "k0", "measured_us": 1, "from": {
        "tune_json": "nope/tune.json", "variant": "auto", "launches": [0]}}]},
     "cannot read"),
])
def test_a_malformed_runs_json_is_a_clear_error(tmp_path, doc, message):
    p = _write(tmp_path, doc)
    with pytest.raises(SiriusError) as e:
        load_runs(p)
    assert message in e.value.message and str(p) in e.value.message


def test_the_cli_rejects_a_malformed_runs_json_with_exit_2(tmp_path, capsys):
    p = _write(tmp_path, {"schema": SCHEMA, "measurements": [{"kernel": "k0"}]})
    code = main(["tune", CHAIN, "-o", str(tmp_path / "o"), "--calibrate", str(p),
                 "--measure", "off"])
    err = capsys.readouterr().err
    assert code == 2 and '"measured_us" must be a positive number' in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()
    assert main(["tune", CHAIN, "-o", str(tmp_path / "o"), "--calibrate",
                 str(tmp_path / "missing.json")]) == 2
    assert "cannot read it" in capsys.readouterr().err


def test_runs_of_another_gpu_are_refused(tmp_path, capsys):
    p = _write(tmp_path, {"schema": SCHEMA, "gpu": "H200 SXM", "measurements": [
        {"kernel": "k0", "measured_us": 7.5, "launches": [_counts()]}]})
    assert main(["tune", CHAIN, "-o", str(tmp_path / "o"), "--calibrate", str(p),
                 "--gpu", "A100"]) == 2
    assert "H200 SXM" in capsys.readouterr().err
