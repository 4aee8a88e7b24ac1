"""`sirius tune` end to end on a corpus program; the same results in process, in a local
process pool and (where installed) on Ray."""

from __future__ import annotations

import base64
import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from sirius.cli import main
from sirius.tune.gpus import gpu
from sirius.tune.report import tune_json
from sirius.tune.tuner import tune
from sirius.tune.variants import Source

ROOT = Path(__file__).resolve().parents[2]
CHAIN = str(ROOT / "kernels" / "elementwise_chain.cu")


def test_tune_writes_a_verified_choice_and_reports(tmp_path, capsys, monkeypatch):
    from sirius.runtime.gpu import GpuUnavailable
    from sirius.runtime.gpu import device as gpu_device

    def no_gpu(ordinal: int = 0):
        raise GpuUnavailable("no driver here (test)")

    monkeypatch.setattr(gpu_device, "load_driver", no_gpu)  # --measure auto: off, and why

    def not_here(*_a, **_k):
        raise AssertionError("verification ran in the main process")

    # the candidates are verified by the pool's workers (spawned: they do not see this patch)
    from sirius.verify import differential

    monkeypatch.setattr(differential, "verify_fused", not_here)
    out = tmp_path / "out"
    assert main(["tune", CHAIN, "-o", str(out), "--jobs", "2", "-q"]) == 0
    doc = json.loads((out / "tune.json").read_text())
    assert doc["fanout"] == {"backend": "process pool (2 workers)", "ray": "off",
                             "ray_address": None, "why_not_ray": None}
    from sirius.tune.variants import _sha

    chosen_sha = next(v["ir_sha"] for v in doc["variants"] if v["label"] == doc["chosen"])
    assert _sha((out / "chosen" / "fused.ll").read_text()) == chosen_sha  # what was verified
    assert doc["schema"] == "sirius-tune/1" and doc["estimate"] is True
    assert doc["measured"] is False and doc["chosen_by"] == "estimate"
    assert doc["measurement"]["why"] == "no GPU can be used here (no driver here (test))"
    assert doc["variants"][0]["measured"] is None and not (out / "runs.json").exists()
    assert doc["gpu"]["name"] == "H100 SXM" and doc["arch"] == "sm_90"
    labels = [v["label"] for v in doc["variants"]]
    assert labels[:4] == ["auto", "vertical", "horizontal", "unfused"]
    # the trade-off passes that changed the default variant, each off in a variant of its own
    by = {v["label"]: v for v in doc["variants"]}
    assert by["auto"]["trade_off_passes_changed"] == ["host-constants", "alias-facts"]
    for name in ("host-constants", "alias-facts"):
        off = by[f"auto without {name}"]
        assert off["passes_off"] == [name] and name not in off["trade_off_passes_changed"]
        assert off["ir_sha"] != by["auto"]["ir_sha"] and off["estimate"] is not None
    assert "auto without loop-fuse" not in by  # it changed nothing here
    assert "megakernel grid" in by and "megakernel counters" in by  # 4 launches <= 512
    chosen = next(v for v in doc["variants"] if v["label"] == doc["chosen"])
    assert chosen["verified"] is True
    assert chosen["launches"] == {"before": 4, "after": 1, "run": 1}
    base = doc["baseline"]
    assert base["launches"]["run"] == 4 and base["verified"] is None
    # the program estimate is the sum of its launches' estimates, each launch_us + body
    for v in [base] + doc["variants"]:
        les = v["launch_estimates"]
        assert v["estimate"]["seconds"] == pytest.approx(sum(e["seconds"] for e in les))
        for e in les:
            t = e["terms"]
            assert e["seconds"] == pytest.approx(t["launch"] + max(t["dram"], t["compute"],
                                                                   t["issue"]))
            assert e["explain"].endswith("[estimate]") and e["estimate"] is True
    # fusing 4 launch-bound launches into 1 saves 3 launch overheads of 3 us
    assert base["estimate"]["seconds"] - chosen["estimate"]["seconds"] > 3 * 3e-6 * 0.9
    assert doc["speedup_estimate"]["over_original"] > 2
    html = (out / "report.html").read_text()
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(pngs) == 4  # variant times, the UAR, roofline, before/after
    assert "The program's UAR" in html and (out / "uar.dot").read_text().count(" -> ") >= 4
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert "ESTIMATE" in html and "http" not in html.split("<body>")[0]
    md = (out / "report.md").read_text()
    assert "Chosen: auto** (by estimate)" in md and "launch-bound" in md
    assert "No GPU measurement: no GPU can be used here (no driver here (test))" in md
    assert sorted(p.name for p in (out / "chosen").iterdir()) == \
        ["fused.ll", "fused.ptx", "plan.json", "report.md"]
    plan = json.loads((out / "chosen" / "plan.json").read_text())
    assert plan["launches"] == {"before": 4, "after": 1}
    assert "chosen: auto" in capsys.readouterr().out


def test_unknown_gpu_is_a_clear_error(tmp_path, capsys):
    assert main(["tune", CHAIN, "-o", str(tmp_path / "o"), "--gpu", "GTX 480"]) == 2
    assert "unknown GPU 'GTX 480'" in capsys.readouterr().err


def test_megakernel_variants_only_up_to_megakernel_launches(tmp_path, capsys, monkeypatch):
    """Programs of more launches than --megakernel-launches get no megakernel variants (their
    build is not started at all); a negative limit is refused before any work."""
    from sirius.tune import fanout

    asked = []

    class Stop(Exception):
        pass

    def record(self, reqs):
        asked.append([q.label for q in reqs])
        raise Stop

    monkeypatch.setattr(fanout.Fanout, "builds", record)
    src = Source((CHAIN,), "sm_90")  # 4 launches
    for limit, want in ((3, False), (4, True), (0, False)):
        with pytest.raises(Stop):
            tune(src, gpu("H100 SXM"), megakernel_launches=limit, jobs=1)
        assert ("megakernel grid" in asked[-1]) is want
        assert ("megakernel counters" in asked[-1]) is want
        assert "auto" in asked[-1]
    assert main(["tune", CHAIN, "-o", str(tmp_path / "o"), "--megakernel-launches", "-1"]) == 2
    assert "--megakernel-launches must be at least 0" in capsys.readouterr().err


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["tune", str(tmp_path / "nope.cu"), "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err


def _estimates(doc: dict) -> list:
    return [(v["label"], v["estimate"]["seconds"], v["ir_sha"], v["verified"])
            for v in [doc["baseline"]] + doc["variants"]]


@pytest.mark.slow  # 15-23 s in make test: make test-all
def test_in_process_and_pool_agree():
    src = Source((CHAIN,), "sm_90")
    one = tune_json(tune(src, gpu("H100 SXM"), jobs=1))
    two = tune_json(tune(src, gpu("H100 SXM"), jobs=2))
    assert _estimates(one) == _estimates(two)
    assert one["ran_on"] == "in process" and two["ran_on"].startswith("process pool")


def _ray_or_skip():
    """Ray, or a skip whose reason is printed (also as a warning: pytest shows warnings
    without -rs): not installed, or it cannot start on this machine."""
    try:
        import ray
    except ImportError:
        _skip("Ray is not installed (pip install 'sirius[scale]')")
    if not ray.is_initialized():
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        except Exception as e:  # noqa: BLE001 - any reason Ray cannot start here
            _skip(f"Ray could not start on this machine: {type(e).__name__}: {e}")
    return ray


def _skip(reason: str):
    warnings.warn(f"Ray test skipped: {reason}", stacklevel=2)
    print(f"SKIPPED: {reason}", file=sys.stderr)
    pytest.skip(reason)


@pytest.mark.slow  # ray.init alone took 15 s here; the test 61-151 s at load 4-6 on 2 cores
def test_ray_builds_the_same_variants_as_in_process():
    """Two builds (the original and 'auto') as Ray tasks on a local Ray give the results of the
    same builds in this process."""
    from sirius.tune import fanout, variants

    ray = _ray_or_skip()
    src = Source((CHAIN,), "sm_90")
    reqs = variants.whole_program_requests(src, [True])[:2]
    try:
        got, how = fanout.run_requests(reqs, use_ray=True)
    finally:
        ray.shutdown()
    want, _ = fanout.run_requests(reqs, jobs=1)
    assert how == "ray" and [r.label for r in got] == ["original", "auto"]
    assert all(r.ok for r in got), [r.error for r in got]
    assert [(r.ir_sha, r.counts) for r in got] == [(r.ir_sha, r.counts) for r in want]


@pytest.mark.slow
def test_ray_tune_agrees_with_in_process():
    ray = _ray_or_skip()
    src = Source((CHAIN,), "sm_90")
    try:
        got = tune_json(tune(src, gpu("H100 SXM"), use_ray=True))
    finally:
        ray.shutdown()
    want = tune_json(tune(src, gpu("H100 SXM"), jobs=1))
    assert got["ran_on"] == "ray"
    assert _estimates(got) == _estimates(want)


def test_a_variant_that_fails_verification_is_never_chosen(monkeypatch):
    from sirius.tune import tuner

    real = tuner._verify

    def fail_auto(src, v, *args):
        ok, note, res = real(src, v, *args)
        if v.label == "auto":  # pretend the fastest variant computes something else
            return False, "NOT OK: injected mismatch", res
        return ok, note, res

    monkeypatch.setattr(tuner, "_verify", fail_auto)
    r = tune(Source((CHAIN,), "sm_90"), gpu("H100 SXM"), jobs=1)
    auto = next(v for v in r.variants if v.label == "auto")
    assert auto.verified is False
    assert r.chosen is not None and r.chosen.label != "auto" and r.chosen.verified is True
    assert r.chosen.seconds >= auto.seconds
    assert any("auto failed verification and is not chosen" in n for n in r.notes)


@pytest.mark.slow  # 18 s
def test_a_rebuild_that_differs_is_measured_again(monkeypatch):
    """When the fused module rebuilt for verification is not the one a worker estimated, the
    rebuilt one is measured and estimated, and that is what is verified and reported."""
    from dataclasses import replace

    from sirius.tune import fanout, tuner

    real = fanout.Fanout.builds

    def skew(self, reqs):
        return [replace(r, ir_sha="0" * 16, counts=())
                if r.label == "auto" else r for r in real(self, reqs)]

    monkeypatch.setattr(tuner.fanout.Fanout, "builds", skew)
    r = tune(Source((CHAIN,), "sm_90"), gpu("H100 SXM"), jobs=1)
    auto = next(v for v in r.variants if v.label == "auto")
    assert auto.verified is True and "re-measured" in auto.verify_note
    assert auto.result.ir_sha != "0" * 16 and len(auto.result.counts) == 1
    assert any(n.startswith("variant auto: ok") for n in r.notes)
    assert r.chosen is auto
