"""`sirius run --device gpu` and `sirius verify --device gpu` in-process on a fake driver whose
kernels run on the CPU executor: the GPU path (PTX emitted for the device's sm_90, arguments
packed from the PTX, the interpreter on GpuDevice) must give the CPU executor's outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sirius.cli import main
from sirius.runtime.gpu import pycuda_driver as driver
from tests.helpers import KERNELS
from tests.runtime.gpu.fakedriver import CpuBackedDriver

PROGRAM = str(KERNELS / "elementwise_chain.cu")


@dataclass(frozen=True)
class _IR:
    device_ir: str
    device_module: object
    files: tuple


def _fake(monkeypatch, fused: bool = False) -> CpuBackedDriver:
    from sirius.analysis.program import analyse

    programs = [analyse([PROGRAM])[0]]
    if fused:
        import llvmlite.binding as llvm

        from sirius.pipeline import fuse

        res = fuse([PROGRAM])
        programs.append(_IR(res.device_ir, llvm.parse_assembly(res.device_ir), res.files))
    fake = CpuBackedDriver(programs)
    monkeypatch.setattr(driver, "_DRIVERS", {0: fake})
    return fake


def test_run_on_the_gpu_gives_the_executors_outputs(monkeypatch, capsys) -> None:
    assert main(["run", PROGRAM, "--json", "-q"]) == 0
    cpu = json.loads(capsys.readouterr().out)
    fake = _fake(monkeypatch)
    assert main(["run", PROGRAM, "--device", "gpu", "--json", "-q"]) == 0
    gpu = json.loads(capsys.readouterr().out)
    assert gpu["device"] == "gpu" and gpu["order"] == "hardware"
    assert gpu["outputs"] == cpu["outputs"] and gpu["outputs"]
    assert [x["kernel"] for x in gpu["launches"]] == [x["kernel"] for x in cpu["launches"]]
    assert all(x["mode"] == "gpu" and x["instructions"] == 0 for x in gpu["launches"])
    loads = [c for c in fake.calls if c[0] == "module_load"]
    assert len(loads) == 1
    assert main(["run", PROGRAM, "--device", "gpu", "-q"]) == 0
    text = capsys.readouterr().out
    assert "on the GPU" in text and " - " in text  # no counters on a GPU


def test_run_on_the_gpu_refuses_executor_options(monkeypatch, capsys) -> None:
    _fake(monkeypatch)
    assert main(["run", PROGRAM, "--device", "gpu", "--check-bounds"]) == 2
    assert "--check-bounds: an option of the CPU executor" in capsys.readouterr().err


def test_verify_on_the_gpu(monkeypatch, capsys) -> None:
    _fake(monkeypatch, fused=True)
    assert main(["verify", PROGRAM, "--device", "gpu", "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["device"]["arch"] == "sm_90"
    kinds = {(r["program"], r["against"]) for r in doc["check"]}
    assert kinds == {("original", "CPU executor"), ("fused", "CPU executor"),
                     ("fused", "GPU original")}
    assert all(r["ok"] and r["elements"] > 0 for r in doc["check"])
