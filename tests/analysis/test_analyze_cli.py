"""`sirius analyze`: the table, the JSON document and the Graphviz output."""

from __future__ import annotations

import json

from tests.analysis.support import KERNELS
from tests.helpers import run_cli


def test_json_document():
    r = run_cli("analyze", str(KERNELS / "matmul_bias_act.cu"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"statements", "dependences", "footprints", "kernels", "exactness"} <= doc.keys()
    launches = [s for s in doc["statements"] if s["kind"] == "launch"]
    assert [s["kernel"] for s in launches] == ["matmul", "bias_add", "act_tanh"]
    assert all({"id", "kernel", "domain"} <= s.keys() for s in doc["statements"])
    by_id = {s["id"]: s["kernel"] for s in launches}
    data = {(by_id.get(d["src"]), by_id.get(d["dst"]), d["kind"], d["buffer"], d["width"],
             d["exact"]) for d in doc["dependences"] if d["kind"] != "CTRL"}
    assert ("matmul", "bias_add", "RAW", "d_C", "THREAD", True) in data
    assert ("bias_add", "act_tanh", "RAW", "d_C", "THREAD", True) in data
    assert doc["exactness"] == {"exact": 42, "accesses": 42}
    # 16 loads of each shared tile per tile step (the i loop unrolled), 2 global loads, 2 tile
    # stores and the C store: 37 accesses in matmul; bias_add 3 (C, bias, C); act_tanh 2
    counts = {k["kernel"]: len(k["accesses"]) for k in doc["kernels"]}
    assert counts == {"matmul": 37, "bias_add": 3, "act_tanh": 2}


def test_text_table_and_dot(tmp_path):
    dot = tmp_path / "uar.dot"
    r = run_cli("analyze", str(KERNELS / "lstm_cell.cu"), "--dot", str(dot))
    assert r.returncode == 0, r.stderr
    assert "dependences (" in r.stdout and "exact accesses: 43/43 (100.0%)" in r.stdout
    assert "S6[l, t] -> S6[l' = l, t' = 1 + t]" in r.stdout
    text = dot.read_text()
    assert text.startswith("digraph uar {")
    assert 'S6 -> S6 [label="RAW d_c", color="forestgreen", style="solid"]' in text  # THREAD
    assert 'S6 -> S6 [label="RAW d_h", color="firebrick", style="bold"]' in text  # GLOBAL
    assert 'style="dotted"' in text  # the sync's control edges


def test_inexact_accesses_are_listed():
    r = run_cli("analyze", str(KERNELS / "histogram_atomics.cu"))
    assert r.returncode == 0, r.stderr
    assert "exact accesses: 4/5 (80.0%)" in r.stdout
    assert "inexact: histogram:48 atomic shared" in r.stdout


def test_bad_program_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("int main() { return ; }\n__global__ void k() { undeclared(); }\n")
    r = run_cli("analyze", str(bad))
    assert r.returncode == 2
    assert "error" in r.stderr
