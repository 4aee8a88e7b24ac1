"""`sirius run`: the command's output, files and exit codes (values are tested in tests/runtime)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import ROOT, run_cli

CHAIN = "kernels/elementwise_chain.cu"  # 4 launches, n = 4096 floats per buffer


def test_json_lists_every_launch_with_counters_and_output_checksums():
    r = run_cli("run", CHAIN, "--json", "--seed", "4")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [x["kernel"] for x in doc["launches"]] == ["scale", "add_bias", "relu", "square"]
    scale = doc["launches"][0]
    # scale reads x[i] and writes y[i] once per element: 4096 * 4 bytes each way
    assert scale["global_load_bytes"] == 4096 * 4
    assert scale["global_store_bytes"] == 4096 * 4
    assert scale["barriers"] == 0 and scale["mode"] == "fast"
    assert set(doc["outputs"]) == {"d_out"}
    assert doc["outputs"]["d_out"]["elements"] == 4096
    # the same seed gives the same checksum; another seed another one
    again = json.loads(run_cli("run", CHAIN, "--json", "--seed", "4").stdout)
    other = json.loads(run_cli("run", CHAIN, "--json", "--seed", "5").stdout)
    assert again["outputs"]["d_out"]["checksum"] == doc["outputs"]["d_out"]["checksum"]
    assert other["outputs"]["d_out"]["checksum"] != doc["outputs"]["d_out"]["checksum"]


def test_save_writes_initial_and_final_contents(tmp_path):
    out = tmp_path / "run.npz"
    r = run_cli("run", CHAIN, "--save", str(out), "--order", "reverse")
    assert r.returncode == 0, r.stderr
    assert "scale" in r.stdout and "d_out" in r.stdout
    data = np.load(out)
    names = {"d_x", "d_y", "d_bias", "d_z", "d_out"}
    assert set(data.files) == {f"{n}.{s}" for n in names for s in ("in", "out")}
    x = data["d_x.in"]
    assert x.dtype == np.float32 and x.shape == (4096,)
    assert np.array_equal(data["d_x.out"], x)  # nothing writes x


def test_input_file_replaces_a_buffer(tmp_path):
    x = np.arange(4096, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "run.npz"
    r = run_cli("run", CHAIN, "--input", f"d_x={tmp_path / 'x.npy'}", "--save", str(out))
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(out)["d_x.in"], x)


def test_bad_options_exit_2_without_traceback():
    for args in (["--order", "sideways"], ["--order", "random"],
                 ["--input", "d_x"], ["--input", "nosuch=/nonexistent.npy"]):
        r = run_cli("run", CHAIN, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr and "error" in r.stderr


def test_gpu_without_a_gpu_exits_2_naming_what_is_missing():
    from sirius.runtime.gpu.pycuda_driver import unavailable_reason

    why = unavailable_reason()
    if why is None:
        pytest.skip("a GPU is present: `run --device gpu` runs (tests/runtime/gpu)")
    r = run_cli("run", CHAIN, "--device", "gpu")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "error" in r.stderr


def test_unknown_input_buffer_is_named(tmp_path):
    np.save(tmp_path / "q.npy", np.zeros(4, np.float32))
    r = run_cli("run", CHAIN, "--input", f"d_nope={tmp_path / 'q.npy'}")
    assert r.returncode == 2
    assert "d_nope" in r.stderr


def test_missing_program_exits_2():
    r = run_cli("run", str(ROOT / "kernels" / "no_such_program.cu"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_piped_tables_are_plain_columns():
    r = run_cli("run", CHAIN, "--seed", "1")
    assert r.returncode == 0, r.stderr
    assert not set("─│┃━┏┓╇") & set(r.stdout)  # no box drawing when not a terminal
    lines = r.stdout.splitlines()
    head = lines.index(next(ln for ln in lines if ln.split()[:2] == ["#", "kernel"]))
    rows = [ln.split() for ln in lines[head + 1:head + 5]]
    assert [row[1] for row in rows] == ["scale", "add_bias", "relu", "square"]
    assert max(len(ln) for ln in lines) < 130
