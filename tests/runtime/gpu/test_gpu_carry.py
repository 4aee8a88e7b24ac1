"""Carried directories: the HostProgram JSON round trip over corpus programs (original and
fused), `prepare`/`load`, `sirius bench --from DIR` end to end on a fake driver whose kernels
run on the CPU executor (the GPU results must match the CPU reference by value), the light
entry point importing nothing of the compiler, and bench's argument errors."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sirius.analysis.program import analyse
from sirius.diagnostics import SiriusError
from sirius.runtime.gpu import carry
from tests.helpers import KERNELS, ROOT, run_cli

PROGRAMS = ["elementwise_chain.cu", "stencil_pingpong.cu", "converge_loop.cu", "lstm_cell.cu",
            "histogram_atomics.cu", "helper_launch.cu", "qkv_branches.cu", "gaussian.cu"]


@functools.cache
def host(name: str):
    return analyse([KERNELS / name])[2]


@functools.cache
def fused(name: str):
    from sirius.pipeline import fuse

    return fuse([KERNELS / name])


def classes(doc) -> set[str]:
    if isinstance(doc, dict):
        return ({doc["_"]} if "_" in doc else set()) | set().union(
            *(classes(v) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(classes(v) for v in doc)) if doc else set()
    return set()


@pytest.mark.parametrize("name", PROGRAMS)
def test_host_program_json_round_trip(name: str) -> None:
    hp = host(name)
    text = json.dumps(carry.host_to_json(hp))
    back = carry.host_from_json(json.loads(text))
    assert back == hp
    assert back.launches() == hp.launches() and back.to_json() == hp.to_json()


def test_round_trip_covers_the_host_model() -> None:
    seen = set().union(*(classes(carry.host_to_json(host(n))) for n in PROGRAMS))
    # loops, ping-pong addresses, opaque loops' expressions, scalars, copies, frees, syncs
    assert {"Loop", "Rotating", "DevRef", "HostRef", "ScalarArg", "BufferArg", "Copy", "Free",
            "Sync", "Alloc", "Launch", "Buffer", "Location"} <= seen


@pytest.mark.parametrize("name", ["elementwise_chain.cu", "lstm_cell.cu"])
def test_fused_host_program_round_trip(name: str) -> None:
    res = fused(name)
    assert res.launches_after < res.launches_before  # a fused program, not the original again
    assert carry.host_from_json(json.loads(json.dumps(carry.host_to_json(res.host)))) == \
        res.host


def test_bad_host_documents() -> None:
    with pytest.raises(SiriusError, match="not a sirius-host/1 document"):
        carry.host_from_json({"schema": "x"})
    doc = carry.host_to_json(host("elementwise_chain.cu"))
    doc["program"]["ops"][0]["_"] = "Teleport"
    with pytest.raises(SiriusError, match="unknown host-model class 'Teleport'"):
        carry.host_from_json(doc)


@dataclass(frozen=True)
class _IR:
    device_ir: str
    device_module: object
    files: tuple


@pytest.fixture(scope="module")
def carried_dir(tmp_path_factory) -> Path:
    from sirius.verify.differential import observed

    res = fused("elementwise_chain.cu")
    names, rule = observed(res.original.host)
    return carry.prepare(res, tmp_path_factory.mktemp("carried"), observed=names,
                         observed_rule=rule, seed=5, command="test")


def test_prepare_and_load(carried_dir: Path) -> None:
    out = carried_dir
    assert {p.name for p in out.iterdir()} >= {"carry.json", "original.ptx", "fused.ptx",
                                               "plan.json", "fused.ll", "report.md",
                                               "reference.npz"}
    c = carry.load(out)
    res = fused("elementwise_chain.cu")
    assert c.original.host == res.original.host and c.fused.host == res.host
    assert c.fused.program.ptx == res.ptx and ".entry" in c.original.program.ptx
    assert c.seed == 5 and c.observed and c.meta["arch"] == "sm_80"
    # the reference is the CPU executor's run of the original with that seed, its
    # multiply-adds contracted as on the GPU; reference_plain the same run rounded plainly
    from sirius.runtime.cpu.contraction import contracted
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    ref, plain = (run_host_program(res.original.host, p, res.original.kernels,
                                   CpuDevice(progress=False), seed=5)
                  for p in (contracted(res.original.program), res.original.program))
    assert c.meta["reference"]["plain"] == "reference_plain.npz"
    for name in c.observed:
        assert c.reference[name].tobytes() == ref.final[name].tobytes()
        assert c.reference_plain[name].tobytes() == plain.final[name].tobytes()
        assert c.dtypes[name] == ref.final[name].dtype
    assert not c.input_mismatches(ref.initial)
    bad = {n: a + 1 for n, a in ref.initial.items()}
    assert c.input_mismatches(bad) == sorted(c.meta["input_checksums"])


def test_bench_from_carried_directory(carried_dir: Path, monkeypatch, capsys,
                                     tmp_path: Path) -> None:
    import llvmlite.binding as llvm

    from sirius.cli.bench import main
    from sirius.runtime.gpu import pycuda_driver as driver
    from tests.runtime.gpu.fakedriver import CpuBackedDriver

    out = carried_dir
    res = fused("elementwise_chain.cu")
    fused_ir = _IR(res.device_ir, llvm.parse_assembly(res.device_ir), res.files)
    fake = CpuBackedDriver([res.original.program, fused_ir])
    monkeypatch.setattr(driver, "_DRIVERS", {0: fake})
    status = main(["--from", str(out), "--runs", "3", "--warmup", "1", "--input-sets", "2",
                   "--per-launch", "--save-outputs", str(tmp_path / "gpu.npz"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert status == 0 and doc["ok"], doc["check"]
    assert {r["against"] for r in doc["check"]} == {"CPU executor", "GPU original"}
    assert all(r["ok"] and r["elements"] > 0 for r in doc["check"])
    bench = doc["bench"]
    assert set(bench["timings"]) == {"original", "original_graph", "fused", "fused_graph"}
    assert bench["programs"]["original"]["launches"] == res.launches_before
    assert bench["programs"]["fused"]["launches"] == res.launches_after
    # --per-launch: every launch of both programs timed on its own, in the same runs
    for side, n in (("original", res.launches_before), ("fused", res.launches_after)):
        rows = bench["launch_timings"][side]
        assert len(rows) == n and all(r["runs"] == 3 and r["median_us"] >= 0 for r in rows)
    assert not fake.mem and not fake.cpu.memory.allocs  # everything given back
    # --save-outputs: both GPU runs' observed buffers, here equal to the CPU reference
    saved = np.load(tmp_path / "gpu.npz")
    c = carry.load(out)
    assert sorted(saved.files) == sorted(f"{s}/{n}" for s in ("original", "fused")
                                         for n in c.observed)
    for n in c.observed:
        np.testing.assert_allclose(saved[f"fused/{n}"], c.reference[n], rtol=1e-6)


def test_a_wrong_gpu_result_is_reported(carried_dir: Path, monkeypatch, capsys) -> None:
    from sirius.cli.bench import main
    from sirius.runtime.gpu import pycuda_driver as driver
    from tests.runtime.gpu.fakedriver import FakeDriver

    out = carried_dir
    monkeypatch.setattr(driver, "_DRIVERS", {0: FakeDriver()})  # kernels that do nothing
    assert main(["--from", str(out), "--check-only"]) == 1
    text = capsys.readouterr().out
    assert "GPU fused" in text and "CPU executor" in text and "mismatch" in text.lower()


def test_light_entry_imports_nothing_of_the_compiler(carried_dir: Path) -> None:
    out = carried_dir
    script = f"""
import sys, json
for heavy in ("llvmlite", "islpy", "networkx", "sirius.backend", "sirius.fusion"):
    sys.modules[heavy] = None  # importing it now fails
sys.path.insert(0, {str(ROOT)!r})
from sirius.runtime.gpu import pycuda_driver as driver
from tests.runtime.gpu.fakedriver import FakeDriver
driver._DRIVERS[0] = FakeDriver()
from sirius.cli.bench import main
sys.exit(main(["--from", {str(out)!r}, "--runs", "2", "--warmup", "0", "--json"]))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1, r.stderr  # the fake's kernels do nothing: the check fails
    doc = json.loads(r.stdout)
    assert doc["bench"]["timings"]["fused"]["runs"] == 2 and not doc["ok"]


def test_bench_argument_errors(tmp_path: Path) -> None:
    r = run_cli("bench", "--from", str(tmp_path / "nope"))
    assert r.returncode == 2 and "not a directory" in r.stderr
    r = run_cli("bench", "--from", str(tmp_path))
    assert r.returncode == 2 and "carry.json" in r.stderr
    r = run_cli("bench")
    assert r.returncode == 2 and "give PROGRAM.cu" in r.stderr
    r = run_cli("bench", "kernels/elementwise_chain.cu", "--from", str(tmp_path))
    assert r.returncode == 2 and "give no PROGRAM.cu" in r.stderr
    (tmp_path / "carry.json").write_text('{"schema": "other"}')
    r = run_cli("bench", "--from", str(tmp_path))
    assert r.returncode == 2 and "not a sirius-carry/1 file" in r.stderr
