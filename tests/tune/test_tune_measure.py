"""`sirius tune --measure`: variants timed on a GPU through the fake driver, whose clock is
known (an eager launch costs 5 us plus the kernel's cost: 1 us by default, 100 us for the
fused kernel `sirius_v0` here). So the original of elementwise_chain.cu (four launches) takes
24 us and the fused program (one launch) 105 us: the measured times must reach tune.json, the
choice must follow them (against the estimates, which favour fusion), the model's error per
kernel must be (estimate - measured) / measured, and runs.json must be accepted by
`--calibrate`. Without a GPU, `--measure on` is an error (exit 2) and `auto` says why it did not
measure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sirius.cli import main
from sirius.runtime.gpu import GpuUnavailable
from sirius.runtime.gpu import device as gpu_device
from sirius.runtime.gpu import pycuda_driver as driver
from sirius.tune.calibrate import fit, load_runs
from sirius.tune.gpus import gpu
from sirius.tune.measure import LaunchTime, Measured, kernel_errors
from sirius.tune.model import Assumptions, LaunchCounts, estimate_program
from tests.runtime.gpu.fakedriver import FakeDriver

ROOT = Path(__file__).resolve().parents[2]
CHAIN = str(ROOT / "kernels" / "elementwise_chain.cu")
KERNELS = ("scale", "add_bias", "relu", "square")


# the tests of one module share the measured tune: one xdist worker runs them all, so the tune
# runs once per suite, not once per worker. It is kept in _MEASURED, not only in a module
# fixture: an xdist worker that runs out of queued tests tears its module fixtures down and
# would tune again for the next test it is sent.
pytestmark = pytest.mark.xdist_group("tune_measure")
_MEASURED: list = []
_RAY_CALLS: list = []


def _no_gpu(ordinal: int = 0):
    raise GpuUnavailable("no driver here (test)")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One `sirius tune --measure on` of elementwise_chain.cu on the fake GPU, fanned out on a
    fake Ray (tests/tune/fakeray.py: its tasks run in this process, so they see the fake
    driver) whose tasks are kept in _RAY_CALLS."""
    if _MEASURED:
        return _MEASURED[0]
    import sys

    from sirius.tune import fanout
    from tests.tune.fakeray import FakeRay

    out = tmp_path_factory.mktemp("measured") / "out"
    fake = FakeDriver(costs={"sirius_v0": 100.0}, launch_us=5.0)
    ray = FakeRay(gpus=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "_DRIVERS", {0: fake})
        mp.setitem(sys.modules, "ray", ray)
        mp.setattr(fanout, "ray_available", lambda: True)
        code = main(["tune", CHAIN, "-o", str(out), "--measure", "on", "--jobs", "1",
                     "--ray", "--runs", "3", "--warmup", "1", "--input-sets", "2", "-q"])
    assert code == 0
    _MEASURED.append((out, json.loads((out / "tune.json").read_text()), fake))
    _RAY_CALLS[:] = ray.calls
    return _MEASURED[0]


def test_on_ray_builds_verification_and_the_gpu_measurement_are_tasks(measured):
    """Issue 17 item 4: variant builds and the verification run as Ray tasks, the GPU
    measurement as a task asking for one GPU."""
    _, doc, _ = measured
    assert doc["ran_on"] == "ray" and doc["fanout"]["backend"] == "ray"
    names = [name for name, _ in _RAY_CALLS]
    assert names.count("build_variant") == len(doc["variants"]) + 1  # and the original
    assert "verify_variant" in names and names.count("measure_on_a_gpu") == 1
    assert all(opts == ({"num_gpus": 1} if name == "measure_on_a_gpu" else {})
               for name, opts in _RAY_CALLS)
    assert doc["measurement"]["ran_on"] == "a Ray task with one GPU"


def _variant(doc: dict, label: str) -> dict:
    return next(v for v in [doc["baseline"]] + doc["variants"] if v["label"] == label)


def test_measured_times_reach_tune_json(measured):
    out, doc, fake = measured
    assert doc["measured"] is True and doc["estimate"] is True
    m = doc["measurement"]
    assert m["on"] and m["device"]["name"] == "Fake H100"
    assert "median of 3 timed runs after 1 warm-up runs; 2 input set(s) rotated" in m["method"]
    assert "L2 flushed before every run" in m["method"]
    want = {"original": 24e-6, "auto": 105e-6, "vertical": 105e-6, "horizontal": 24e-6,
            "unfused": 24e-6}
    for label, t in want.items():
        v = _variant(doc, label)
        assert v["measured"]["measured"] is True and v["measured"]["runs"] == 3
        assert v["measured"]["median_s"] == pytest.approx(t)
        assert v["measured"]["p10_s"] == pytest.approx(t) == v["measured"]["p90_s"]
        assert v["relative_error"] == pytest.approx((v["estimate"]["seconds"] - t) / t)
    # one program per device module: original, horizontal and unfused are one program here
    assert "timed once" in _variant(doc, "unfused")["measure_note"]
    # the estimates keep their labels
    for v in [doc["baseline"]] + doc["variants"]:
        assert v["estimate"]["estimate"] is True
        assert all(e["estimate"] is True and e["explain"].endswith("[estimate]")
                   for e in v["launch_estimates"])
    # the eager replays were timed: no graph was captured
    assert not any(c[0] == "begin_capture" for c in fake.calls)


def test_the_choice_follows_the_measured_times(measured):
    out, doc, _ = measured
    # the model estimates the fused program fastest; the fake GPU runs it 4x slower
    assert _variant(doc, "auto")["estimate"]["seconds"] < \
        _variant(doc, "horizontal")["estimate"]["seconds"]
    assert doc["chosen"] == "horizontal" and doc["chosen_by"] == "measured time"
    assert _variant(doc, "horizontal")["verified"] is True
    assert doc["speedup_measured"]["over_default_fuse"] == pytest.approx(105 / 24)
    assert doc["speedup_estimate"]["over_default_fuse"] < 1
    md = (out / "report.md").read_text()
    assert "**Chosen: horizontal** (by measured time), measured 24 us on Fake H100" in md
    assert "The choice uses the measured times" in md and "MEASURED" in md
    html = (out / "report.html").read_text()
    assert "<b>Chosen: horizontal</b> (by measured time)" in html


def test_the_error_per_kernel_in_tune_json(measured):
    _, doc, _ = measured
    orig = _variant(doc, "original")
    ks = {k["kernel"]: k for k in orig["kernels_measured"]}
    assert set(ks) == set(KERNELS)
    for k in ks.values():  # each kernel launched once: 5 us + 1 us on the fake clock
        assert k["measured_s"] == pytest.approx(6e-6) and k["estimate"] and k["measured"]
        assert k["relative_error"] == pytest.approx((k["estimate_s"] - 6e-6) / 6e-6)
        est = next(x for x in orig["estimate"]["kernels"] if x["kernel"] == k["kernel"])
        assert k["estimate_s"] == est["seconds"]
    assert [e["measured_s"] for e in orig["launch_estimates"]] == pytest.approx([6e-6] * 4)
    (fused,) = _variant(doc, "auto")["kernels_measured"]
    assert fused["kernel"] == "sirius_v0" and fused["measured_s"] == pytest.approx(105e-6)
    assert fused["relative_error"] < -0.9  # the fake GPU is far slower than the model says


def test_runs_json_is_accepted_by_calibrate(measured):
    out, doc, _ = measured
    runs = load_runs(out / "runs.json")
    assert runs.gpu == "H100 SXM" and runs.device == "Fake H100"
    got = {(m.label, m.kernel): m.seconds for m in runs.measurements}
    want = {(f"original: launch {i} ({k})", k): 6e-6 for i, k in enumerate(KERNELS)}
    want[("auto: launch 0 (sirius_v0)", "sirius_v0")] = 105e-6
    # the variants without a trade-off pass are other programs (other fused modules): timed
    # too; the same program is timed once (horizontal is unfused's program, not timed again)
    passes_off = {key: s for key, s in got.items() if " without " in key[0]}
    assert {label.split(":")[0] for label, _ in passes_off} == \
        {"auto without host-constants", "auto without alias-facts"}
    assert all(s == pytest.approx(105e-6) for s in passes_off.values())
    got = {key: s for key, s in got.items() if key not in passes_off}
    assert got == pytest.approx(want)
    cal = fit(runs, gpu("H100 SXM"), Assumptions())
    # 4 launches of the original, one of auto and one of each variant without a pass
    assert len(cal.residuals) == 7 and cal.rms("after") < cal.rms("before")


@pytest.mark.slow  # a second tune (10-40 s); fit() on runs.json is tested above in make test
def test_calibrating_on_the_runs_of_a_measured_tune(measured, tmp_path, monkeypatch):
    out, _, _ = measured
    monkeypatch.setattr(gpu_device, "load_driver", _no_gpu)
    assert main(["tune", CHAIN, "-o", str(tmp_path / "c"), "--calibrate",
                 str(out / "runs.json"), "--jobs", "1", "-q"]) == 0
    doc = json.loads((tmp_path / "c" / "tune.json").read_text())
    cal = doc["calibration"]
    assert cal["before"] == {"launch_us": 3.0, "dram_gbps": 3350.0, "issue_rate_factor": 1.0,
                             "grid_sync_us": 2.62, "wait_us": 4.74}
    assert set(cal["not_fitted"]) >= {"grid_sync_us", "wait_us"}  # no megakernel measured
    assert cal["after"]["launch_us"] != 3.0 and len(cal["residuals"]) == 7
    assert doc["gpu"]["launch_us"] == cal["after"]["launch_us"]
    assert doc["gpu"]["dram_gbps"] == cal["after"]["dram_gbps"]
    assert doc["measured"] is False
    md = (tmp_path / "c" / "report.md").read_text()
    assert "## Calibration" in md and "RMS relative error" in md and "calibrated" in md


def test_measure_on_without_a_gpu_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_device, "load_driver", _no_gpu)
    assert main(["tune", CHAIN, "-o", str(tmp_path / "o"), "--measure", "on"]) == 2
    err = capsys.readouterr().err
    assert "--measure on: no GPU can be used here: no driver here (test)" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_measure_auto_without_a_gpu_says_why():
    from sirius.cli.tune import _device
    from sirius.tune.measure import MeasureInfo
    from sirius.tune.report import time_note

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpu_device, "load_driver", _no_gpu)
        device, why = _device("auto")
    assert device is None and why == "no GPU can be used here (no driver here (test))"
    assert _device("off") == (None, "--measure off")

    class R:  # what time_note reads of a TuneResult
        measurement = MeasureInfo(False, why)
        calibration = None

    note = time_note(R())  # type: ignore[arg-type]
    assert "ESTIMATE" in note and note.endswith(f"No GPU measurement: {why}.")


def _counts(kernel: str, dram: int) -> LaunchCounts:
    return LaunchCounts(kernel, kernel, (132, 1, 1), (256, 1, 1), 0, 1000, dram, (), 32, 0)


def test_the_error_per_kernel_by_hand():
    """Kernels a, b, a: a's estimate is the sum of its two launches' estimates, its measured
    time the sum of their medians, the error (estimate - measured) / measured."""
    est = estimate_program([_counts("a", 1 << 20), _counts("b", 1 << 24), _counts("a", 1 << 22)],
                           gpu("H100 SXM"))
    m = Measured(40e-6, 39e-6, 41e-6, 3, "", "GPU", (
        LaunchTime("a", 5e-6, 5e-6, 5e-6), LaunchTime("b", 20e-6, 20e-6, 20e-6),
        LaunchTime("a", 15e-6, 15e-6, 15e-6)))
    a, b = kernel_errors(est, m)
    ea = est.launches[0].seconds + est.launches[2].seconds
    assert (a.kernel, a.launches, a.measured_s) == ("a", 2, pytest.approx(20e-6))
    assert a.estimate_s == pytest.approx(ea)
    assert a.error == pytest.approx((ea - 20e-6) / 20e-6)
    assert b.error == pytest.approx((est.launches[1].seconds - 20e-6) / 20e-6)
    # launches that are not the counted ones (another order, another count): no errors
    swapped = Measured(40e-6, 39e-6, 41e-6, 3, "", "GPU", m.launches[::-1][:2])
    assert kernel_errors(est, swapped) == []


@pytest.mark.gpu
def test_measure_on_a_real_gpu(tmp_path):
    """On a real GPU (skipped without pycuda, a device or clang-22): the measured times are
    positive and ordered (p10 <= median <= p90), every kernel has an error, runs.json loads.
    No figure is asserted: what the GPU takes is what this test reports, not what it checks."""
    import shutil

    from sirius.runtime.gpu import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU here: {reason}")
    if shutil.which("clang-22") is None:
        pytest.skip("no clang-22 to compile the program here")
    out = tmp_path / "out"
    assert main(["tune", CHAIN, "-o", str(out), "--measure", "on", "--jobs", "1",
                 "--runs", "20", "-q"]) == 0
    doc = json.loads((out / "tune.json").read_text())
    assert doc["measured"] and doc["chosen_by"] == "measured time"
    for v in [doc["baseline"]] + doc["variants"]:
        m = v["measured"]
        assert m is not None and 0 < m["p10_s"] <= m["median_s"] <= m["p90_s"]
        assert v["kernels_measured"] and all(k["measured_s"] > 0
                                             for k in v["kernels_measured"])
    assert load_runs(out / "runs.json").measurements
