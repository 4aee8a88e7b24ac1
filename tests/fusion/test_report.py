"""report.md: identical fused kernels (model layers) get one section with all their uses."""

from __future__ import annotations

import collections

import sirius
from tests.helpers import KERNELS


def test_shared_kernels_have_one_section_each(tmp_path):
    r = sirius.fuse(str(KERNELS / "tvm" / "lstm.cu"))
    uses = collections.Counter(rec.name for rec in r.result.fused)
    shared = {name: n for name, n in uses.items() if n > 1}
    assert shared, "the LSTM's cells share fused kernels"
    r.write(tmp_path)
    report = (tmp_path / "report.md").read_text()
    for name, n in uses.items():
        heads = [ln for ln in report.splitlines() if ln.startswith(f"### {name} ")]
        assert len(heads) == 1, heads
        members = sum(len(rec.nodes) for rec in r.result.fused if rec.name == name)
        if n > 1:
            assert f"used by {n} launches" in heads[0]
        row = next(ln for ln in report.splitlines() if ln.startswith(f"| {name} |"))
        assert f"| {members} -> {n} |" in row
