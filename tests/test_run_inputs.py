"""`sirius run --inputs FILE.npz`: a TVM reference file's inputs and parameters in one flag."""

from __future__ import annotations

import numpy as np

from tests.helpers import KERNELS, run_cli

QKV = KERNELS / "tvm" / "bert_qkv.cu"


def test_tvm_inputs_give_tvm_outputs(tmp_path):
    ref = np.load(KERNELS / "tvm" / "bert_qkv.npz")
    given = {k: ref[k] for k in ref.files if not k.startswith("d_out_")}
    np.savez(tmp_path / "in.npz", **given)
    r = run_cli("run", str(QKV), "--inputs", str(tmp_path / "in.npz"), "--save",
                str(tmp_path / "out.npz"), "--json")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    for name in ("d_out_q", "d_out_k", "d_out_v"):
        got = out[f"{name}.out"].reshape(ref[name].shape)
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-6)


def test_an_array_that_names_no_buffer_is_refused(tmp_path):
    np.savez(tmp_path / "in.npz", d_not_a_buffer=np.zeros(3, np.float32))
    r = run_cli("run", str(QKV), "--inputs", str(tmp_path / "in.npz"))
    assert r.returncode == 2
    assert "d_not_a_buffer" in r.stderr and "d_in_x" in r.stderr  # names the real buffers


def test_unreadable_npz_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    r = run_cli("run", str(QKV), "--inputs", str(bad))
    assert r.returncode == 2
    assert "--inputs" in r.stderr and "cannot read" in r.stderr


def test_invalid_arch_is_blamed_on_the_option():
    r = run_cli("inspect", str(QKV), "--arch", "sm_999")
    assert r.returncode == 2
    assert "--arch sm_999" in r.stderr and "bert_qkv.cu:1" not in r.stderr
    r = run_cli("inspect", str(QKV), "--arch", "volta")
    assert r.returncode == 2 and "not a GPU architecture" in r.stderr
