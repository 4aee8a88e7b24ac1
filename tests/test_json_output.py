"""Every command's `--json` prints only JSON on stdout (progress and notes go to stderr)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_cli

CHAIN = "kernels/elementwise_chain.cu"


@pytest.mark.parametrize("command, key", [
    (["inspect"], "kernels"),
    (["analyze"], "statements"),
    (["run", "--seed", "2"], "launches"),
    (["verify", "--order", "forward"], "ok"),
])
def test_json_is_the_whole_stdout(command, key):
    r = run_cli(*command, CHAIN, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert key in doc


def test_fuse_json_is_the_plan(tmp_path):
    r = run_cli("fuse", CHAIN, "--json", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["launches"] == {"before": 4, "after": 1}
    assert [len(k["covers"]) for k in doc["fused_kernels"]] == [4]


@pytest.mark.parametrize("command", [["inspect"], ["analyze"], ["run"], ["compile"]])
def test_dash_o_writes_the_json_to_a_file(command, tmp_path):
    out = tmp_path / "doc.json"
    r = run_cli(*command, CHAIN, "--json", "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["files"] if "files" in doc else doc["launches"]


def test_dash_o_naming_a_directory_is_a_clear_error(tmp_path):
    r = run_cli("inspect", CHAIN, "-o", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr
