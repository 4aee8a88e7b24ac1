"""scripts/bench_to_runs.py: per-launch GPU timings matched to a tune.json's launch estimates
launch by launch, into a RUNS.json that `--calibrate` loads; a variant whose launches differ
is left out and said; `--whole` writes one whole-program measurement per program."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sirius.tune.calibrate import load_runs
from tests.helpers import ROOT

_spec = importlib.util.spec_from_file_location("bench_to_runs",
                                               ROOT / "scripts" / "bench_to_runs.py")
b2r = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(b2r)


def _counts(kernel: str, grid: int) -> dict:
    return {"kernel": kernel, "grid": [grid, 1, 1], "block": [128, 1, 1],
            "instructions": 1000 * grid, "dram_bytes": 4096 * grid, "registers": 24}


def _variant(label: str, launches: list[tuple[str, int]]) -> dict:
    return {"label": label, "launch_estimates": [{"counts": _counts(k, g)} for k, g in launches]}


def _timings(launches: list[tuple[str, int]], us: float) -> list[dict]:
    return [{"index": i, "kernel": k, "grid": [g, 1, 1], "block": [128, 1, 1],
             "median_us": us + i, "p10_us": us + i - 0.5, "p90_us": us + i + 0.5}
            for i, (k, g) in enumerate(launches)]


ORIGINAL = [("scale", 32), ("add", 32), ("scale", 64)]
FUSED = [("sirius_v0", 64)]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    tune = tmp_path / "tune" / "prog"
    tune.mkdir(parents=True)
    (tune / "tune.json").write_text(json.dumps({
        "baseline": _variant("original", ORIGINAL),
        "variants": [_variant("auto", FUSED),
                     _variant("megakernel grid", [("sirius_g0", 132)])]}))
    camp = tmp_path / "campaign"
    camp.mkdir()
    bench = {"device": {"name": "NVIDIA H200"},
             "timings": {"original_graph": {"median_us": 9.0, "p10_us": 8.5, "p90_us": 9.5},
                         "fused_graph": {"median_us": 4.0, "p10_us": 3.8, "p90_us": 4.2}},
             "launch_timings": {"original": _timings(ORIGINAL, 3.0),
                                "fused": _timings(FUSED, 5.0)}}
    (camp / "def__prog.json").write_text(json.dumps({"bench": bench}))
    # a megakernel whose grid is not the one tune built: left out
    mk = {"device": {"name": "NVIDIA H200"},
          "launch_timings": {"fused": _timings([("sirius_g0", 16)], 7.0)}}
    (camp / "grid__prog.json").write_text(json.dumps({"bench": mk}))
    (camp / "summary.json").write_text("{}")
    return camp, tmp_path / "tune"


def test_per_launch_measurements(dirs, tmp_path, capsys) -> None:
    camp, tune = dirs
    out = tmp_path / "runs.json"
    assert b2r.main([str(camp), str(tune), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4 measurements" in text and "grid__prog fused: launch 0" in text
    runs = load_runs(out)
    assert runs.gpu == "H200 SXM" and runs.device == "NVIDIA H200"  # the table entry
    got = [(m.kernel, round(m.seconds * 1e6, 3), m.counts[0].grid[0]) for m in runs.measurements]
    assert got == [("scale", 3.0, 32), ("add", 4.0, 32), ("scale", 5.0, 64),
                   ("sirius_v0", 5.0, 64)]


def test_whole_programs(dirs, tmp_path) -> None:
    camp, tune = dirs
    out = tmp_path / "runs_graph.json"
    assert b2r.main([str(camp), str(tune), "-o", str(out), "--whole"]) == 0
    runs = load_runs(out)
    assert [(m.kernel, round(m.seconds * 1e6, 3), len(m.counts)) for m in runs.measurements] \
        == [("*", 9.0, 3), ("*", 4.0, 1)]
    assert "graph" in runs.method


def test_inline_counts_stand_alone(dirs, tmp_path) -> None:
    camp, tune = dirs
    out = tmp_path / "alone" / "runs.json"
    out.parent.mkdir()
    assert b2r.main([str(camp), str(tune), "-o", str(out), "--whole", "--inline"]) == 0
    doc = json.loads(out.read_text())
    assert all("from" not in m and m["launches"] for m in doc["measurements"])
    (tune / "prog" / "tune.json").unlink()  # not needed any more
    runs = load_runs(out)
    assert [[c.kernel for c in m.counts] for m in runs.measurements] == \
        [[k for k, _ in ORIGINAL], [k for k, _ in FUSED]]


def test_nothing_matched_is_an_error(tmp_path, capsys) -> None:
    (tmp_path / "c").mkdir()
    assert b2r.main([str(tmp_path / "c"), str(tmp_path), "-o", str(tmp_path / "r.json")]) == 2
    assert "no measurement matched" in capsys.readouterr().err
