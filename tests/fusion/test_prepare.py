"""The one-time prepare part (issue 14 item 8, sirius/fusion/plan/prepare.py): launches that
compute only from the parameters are marked, never fused with per-inference launches, reported
apart, and counted apart by verify; launches that read an input, sit in a host loop, or write
what something else writes stay per inference; a "parameter" a kernel writes is none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sirius.cli import main
from sirius.fusion.plan.planner import Options
from sirius.fusion.report import plan_json, report_md
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = Path(__file__).parent / "prepare_programs" / "weights.cu"


def _kernels(res, prepare: bool) -> list[str]:
    return [op.kernel for op in res.host.launches() if op.prepare is prepare]


def _members(res) -> dict[str, list[str]]:
    return {rec.name: [n.launch.kernel for n in rec.nodes] for rec in res.fused}


def test_weight_transforms_form_the_prepare_part_and_fuse_only_among_themselves():
    res = fuse([WEIGHTS], Options(params=("d_w", "d_b")))
    assert [p.kernel for p in res.prepare.launches] == ["transpose", "scale_bias"]
    assert res.prepare.params == ("d_w", "d_b")
    # the two prepare launches fuse with each other, matvec and relu with each other, never
    # across the parts
    groups = sorted(sorted(m) for m in _members(res).values())
    assert groups == [["matvec", "relu"], ["scale_bias", "transpose"]]
    assert len(_kernels(res, True)) == 1 and len(_kernels(res, False)) == 1
    rep = verify_fused(res.original, res, seed=3)
    assert rep.ok, rep.render()
    c = rep.counters()
    total, prep, inf = c["original"], c["prepare"]["original"], c["per_inference"]["original"]
    assert prep["launches"] == 2 and inf["launches"] == 2
    assert all(inf[k] == total[k] - prep[k] for k in total)
    assert c["prepare"]["fused"]["launches"] == 1 and c["per_inference"]["fused"]["launches"] == 1
    # the transpose loads and stores all of W once: it is in the prepare part, not per inference
    assert prep["global_load_bytes"] >= 256 * 256 * 4
    assert inf["global_store_bytes"] == 2 * 256 * 4  # matvec's y and relu's y
    md = report_md(res)
    assert "## Prepare part (one-time) and per-inference part" in md
    assert "Parameters (--params): d_w, d_b." in md
    doc = plan_json(res)
    assert [p["kernel"] for p in doc["prepare"]["launches"]] == ["transpose", "scale_bias"]
    assert any(op.get("prepare") for op in doc["host"]["ops"] if op["op"] == "launch")


def test_without_parameters_every_launch_is_per_inference():
    res = fuse([WEIGHTS])  # no --params, no import-tvm sidecar
    assert res.prepare is None and not _kernels(res, True)
    assert "Prepare part" not in report_md(res)
    rep = verify_fused(res.original, res, seed=3)
    assert rep.ok and "prepare" not in rep.counters()


@pytest.mark.parametrize("flag,prepare", [("LOOPED", ["transpose"]),
                                          ("BIAS_FROM_X", ["transpose"]),
                                          ("REUPLOAD", ["scale_bias"])])
def test_a_launch_in_a_loop_reading_an_input_or_an_overwritten_parameter_is_per_inference(
        flag, prepare):
    res = fuse([WEIGHTS], Options(params=("d_w", "d_b")), flags=(f"-D{flag}",))
    assert [p.kernel for p in res.prepare.launches] == prepare
    assert verify_fused(res.original, res, seed=3).ok


def test_a_parameter_a_kernel_writes_is_none():
    # d_y is written by matvec and relu: not a parameter (a note says who writes it); d_w* is
    # a pattern
    res = fuse([WEIGHTS], Options(params=("d_w*", "d_y")))
    assert res.prepare.params == ("d_w",)
    assert any(n.startswith("d_y is not a parameter: ") and "matvec" in n
               for n in res.prepare.notes), res.prepare.notes
    # d_wt matched the pattern too, but the transpose writes it: not a parameter either
    assert any(n.startswith("d_wt is not a parameter") for n in res.prepare.notes)
    assert [p.kernel for p in res.prepare.launches] == ["transpose"]


def test_cli_params(tmp_path, capsys):
    assert main(["fuse", str(WEIGHTS), "-o", str(tmp_path / "o"), "-q", "--no-verify",
                 "--params", "d_w,d_b"]) == 0
    doc = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert [p["kernel"] for p in doc["prepare"]["launches"]] == ["transpose", "scale_bias"]
    assert main(["fuse", str(WEIGHTS), "-o", str(tmp_path / "p"), "-q", "--no-verify",
                 "--params", "d_nosuch"]) == 2
    assert "--params d_nosuch: no buffer of the program is named so" in capsys.readouterr().err


def test_tvm_import_parameters_come_from_the_sidecar():
    """op_dense transposes its weight in a kernel of its own: the sidecar op_dense.json names
    d_param_weight a parameter, so that launch is the prepare part."""
    res = fuse([ROOT / "kernels" / "tvm" / "op_dense.cu"])
    assert res.prepare.source == "op_dense.json (sirius import-tvm)"
    assert [p.kernel for p in res.prepare.launches] == ["transpose_kernel"]
    rep = verify_fused(res.original, res, seed=7)
    assert rep.ok
    assert rep.counters()["per_inference"]["original"]["launches"] == 1


def test_tune_estimates_show_the_prepare_part():
    """sirius tune's counts mark the prepare launches (original and fused), and the estimate
    says how much of the time is the one-time part."""
    from sirius.tune.gpus import gpu
    from sirius.tune.model import Assumptions
    from sirius.tune.tuner import estimate_variant
    from sirius.tune.variants import Request, Source, build

    src = Source((str(WEIGHTS),), "sm_90", params=("d_w", "d_b"))
    for req in (Request(src, "original", False, "original", original=True),
                Request(src, "auto", True, "auto")):
        vr, _ = build(req)
        assert vr.ok, vr.error
        marked = [c.kernel for c in vr.counts if c.prepare]
        assert marked == (["transpose", "scale_bias"] if req.original else ["sirius_h0"])
        est = estimate_variant(vr, gpu("H100 SXM"), Assumptions()).estimate
        assert 0 < est.prepare_seconds < est.seconds
        assert est.to_json()["prepare_launches"] == len(marked)
