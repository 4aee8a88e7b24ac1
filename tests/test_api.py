"""The Python API (docs/api.md): the documented example runs, and values are checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

import sirius

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ROOT / "kernels" / "elementwise_chain.cu"


def test_documented_example_runs(tmp_path, monkeypatch):
    doc = (ROOT / "docs" / "api.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    monkeypatch.chdir(ROOT)
    scope = {"out_dir": tmp_path / "out"}
    exec(compile(code, "docs/api.md", "exec"), scope)
    r = scope["r"]
    assert (r.launches_before, r.launches_after) == (4, 1)
    assert scope["report"].ok
    names = sorted(p.name for p in scope["written"])
    assert names == ["fused.ll", "fused.ptx", "plan.json", "report.md"]
    assert json.loads((tmp_path / "out" / "plan.json").read_text()) == \
        json.loads(json.dumps(scope["plan"]))


def test_run_matches_the_chain_computed_by_numpy():
    # elementwise_chain.cu: out = max(0.5 * x + bias, 0)^2, on the executor's seeded inputs
    res = sirius.run(str(CHAIN), seed=3)
    assert [rec.stats.kernel for rec in res.launches] == ["scale", "add_bias", "relu", "square"]
    x, bias = res.initial["d_x"], res.initial["d_bias"]
    z = np.maximum(np.float32(0.5) * x + bias, np.float32(0))
    np.testing.assert_array_equal(res.final["d_out"], z * z)


def test_analyze_and_inspect_agree_on_launches():
    uar = sirius.analyze(str(CHAIN))
    doc = sirius.inspect(str(CHAIN))
    launches = [s for s in uar.statements if s.kind == "launch"]
    kernels = {k["name"] for k in doc["kernels"]}
    assert len(launches) == 4
    assert {s.label for s in launches} <= kernels
