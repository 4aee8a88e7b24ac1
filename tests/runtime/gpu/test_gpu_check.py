"""How GPU results are checked against the CPU executor (sirius/cli/bench.py `gpu_check`):
verify's tolerance, then an allowance only where the program's own rounding explains the
difference; GPU fused against GPU original never gets one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sirius.cli.bench import gpu_check, rounding_allowance

REF = np.linspace(-2.0, 2.0, 64, dtype=np.float32)


def _runs(original, fused) -> dict:
    return {"original": SimpleNamespace(final={"y": original}),
            "fused": SimpleNamespace(final={"y": fused})}


def test_within_the_programs_sensitivity() -> None:
    plain = REF + np.float32(1e-3)  # the executor's two roundings lie 1e-3 apart
    gpu = REF + np.float32(1.5e-3)
    why = rounding_allowance(gpu, REF, plain)
    assert "sensitivity to rounding" in why and "dominated" not in why
    assert rounding_allowance(REF + np.float32(3e-3), REF, plain) == ""  # beyond 2x
    assert rounding_allowance(gpu, REF, REF.copy()) == ""  # no spread, no allowance
    assert rounding_allowance(gpu, REF, None) == ""
    # a program whose outputs are rounding noise is accepted, and said to be
    noise = REF + np.float32(0.5)
    assert "dominated by rounding" in rounding_allowance(noise, REF, noise)


def test_non_finite_values_must_match() -> None:
    ref = REF.copy()
    ref[3] = np.nan
    gpu = ref + np.float32(1e-3)
    plain = ref + np.float32(1e-3)
    assert rounding_allowance(gpu, ref, plain)
    gpu[3] = 1.0  # a NaN lost
    assert rounding_allowance(gpu, ref, plain) == ""


def test_half_precision_two_ulps_of_the_largest_value() -> None:
    ref = np.linspace(-0.9, 0.9, 64).astype(np.float16)  # largest 0.9: ulp 2**-11
    assert rounding_allowance(ref + np.float16(2 ** -10), ref, None)
    assert rounding_allowance(ref + np.float16(2 ** -9), ref, None) == ""
    # float32 gets no ulp allowance
    assert rounding_allowance(REF + np.float32(1e-4), REF, None) == ""


def test_rows_and_exit_status() -> None:
    plain = {"y": REF + np.float32(1e-3)}
    gpu = REF + np.float32(1.5e-3)
    rows = gpu_check({"y": REF}, _runs(gpu, gpu), ["y"], plain=plain)
    by = {(r.side, r.against): r for r in rows}
    assert by["original", "CPU executor"].ok and by["original", "CPU executor"].accepted
    assert not by["original", "CPU executor"].comparison.ok  # beyond verify's tolerance
    assert by["fused", "GPU original"].ok and not by["fused", "GPU original"].accepted
    # the fused program on the GPU differs from the GPU original by as much: not accepted
    rows = gpu_check({"y": REF}, _runs(REF, gpu), ["y"], plain=plain)
    by = {(r.side, r.against): r for r in rows}
    assert by["fused", "CPU executor"].ok and not by["fused", "GPU original"].ok
    # --exact: no allowance
    rows = gpu_check({"y": REF}, _runs(gpu, gpu), ["y"], exact=True, plain=plain)
    assert not any(r.ok for r in rows if r.against == "CPU executor")
    assert rows[0].to_json()["ok"] is False
