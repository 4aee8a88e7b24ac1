"""Executor counters in `sirius verify --json` and report.md, and `sirius fuse -p/--no-postopt`
(issue 14, item 1)."""

from __future__ import annotations

import json

import pytest

from sirius.verify.counters import COUNTERS, Counters, ratios
from tests.helpers import run_cli

CHAIN = "kernels/elementwise_chain.cu"


def _sums(launches: list[dict]) -> dict[str, int]:
    """What the counters must be: `sirius run --json`'s per-launch stats added up."""
    return {"launches": len(launches),
            "instructions": sum(x["instructions"] for x in launches),
            "global_load_bytes": sum(x["global_load_bytes"] for x in launches),
            "global_store_bytes": sum(x["global_store_bytes"] for x in launches),
            "shared_bytes": sum(x["shared_load_bytes"] + x["shared_store_bytes"]
                                for x in launches),
            "barriers": sum(x["barriers"] for x in launches),
            "waits": sum(x["waits"] for x in launches)}


def test_verify_json_has_the_counters_of_both_programs():
    r = run_cli("verify", CHAIN, "--json", "-q", "--order", "forward")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)["counters"]
    assert set(c["original"]) == set(COUNTERS) == set(c["fused"])
    run = run_cli("run", CHAIN, "--json", "-q", "--seed", "7")
    assert run.returncode == 0, run.stderr
    assert c["original"] == _sums(json.loads(run.stdout)["launches"])
    assert (c["original"]["launches"], c["fused"]["launches"]) == (4, 1)
    # the fused chain runs one guard and one index computation instead of four
    assert c["fused"]["instructions"] < c["original"]["instructions"]
    assert c["ratio"]["launches"] == 0.25
    assert c["ratio"]["shared_bytes"] is None  # nothing to divide by


def test_fuse_report_shows_counters_and_the_pipeline(tmp_path):
    out = tmp_path / "out"
    r = run_cli("fuse", CHAIN, "-o", str(out), "-q", "--no-postopt")
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["postopt"] == {"pipeline": "", "passes": []}
    none = plan["verification"]["counters"]
    report = (out / "report.md").read_text()
    assert "post-fusion passes: none (--no-postopt)" in report
    assert f"| instructions | {none['original']['instructions']} | " \
           f"{none['fused']['instructions']} |" in report


@pytest.mark.slow
def test_fuse_pipeline_selects_the_passes(tmp_path):
    out = tmp_path / "out"
    r = run_cli("fuse", CHAIN, "-o", str(out), "-q", "--no-postopt")
    assert r.returncode == 0, r.stderr
    none = json.loads((out / "plan.json").read_text())["verification"]["counters"]
    r = run_cli("fuse", CHAIN, "-o", str(out), "-q", "-p", "llvm-opt{rounds=1}")
    assert r.returncode == 0, r.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["postopt"]["pipeline"] == "llvm-opt{level=3,rounds=1}"
    assert [s["pass"] for s in plan["postopt"]["passes"]] == ["llvm-opt{level=3,rounds=1}"]
    opt = plan["verification"]["counters"]
    # LLVM's pipeline inlines the fragments: fewer instructions than none at all
    assert opt["fused"]["instructions"] < none["fused"]["instructions"]
    assert opt["original"] == none["original"]


def test_fuse_pipeline_errors_exit_2():
    r = run_cli("fuse", CHAIN, "--json", "-p", "llvm-o3")
    assert r.returncode == 2 and "unknown pass 'llvm-o3'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli("verify", CHAIN, "--json", "-p", "llvm-opt", "--no-postopt")
    assert r.returncode == 2 and "contradict" in r.stderr, r.stderr


def test_counters_sum_and_ratios():
    class S:  # a LaunchStats stand-in
        def __init__(self, i):
            self.instructions, self.global_load_bytes, self.global_store_bytes = i, 2 * i, 3
            self.shared_load_bytes, self.shared_store_bytes, self.barriers = 1, 1, 0

    c = Counters.of([S(10), S(30)])
    assert c.to_json() == {"launches": 2, "instructions": 40, "global_load_bytes": 80,
                           "global_store_bytes": 6, "shared_bytes": 4, "barriers": 0,
                           "waits": 0}
    r = ratios(c.to_json(), Counters.of([S(10)]).to_json())
    assert r["instructions"] == 0.25 and r["barriers"] is None
