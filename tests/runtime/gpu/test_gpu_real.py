"""On a real GPU (marker `gpu`; skipped, with the reason, where pycuda or a device is missing):
every corpus program's original and fused PTX runs on the GPU with the CPU executor's seeded
inputs, and every observed buffer matches the CPU executor's run of the original (verify's
tolerances), as does the fused program's against the GPU original.

The programs are prepared here (clang, fusion, the CPU reference) unless SIRIUS_GPU_CARRY
names a directory of carried programs written by `sirius bench PROGRAM.cu --prepare DIR/...` on
a machine with clang (docs/gpu.md): that is how the test runs on a GPU machine without the
compiler. Either one sub-directory per program stem, or `scripts/gpu_prepare.sh`'s layout,
VARIANT/STEM: then `def` holds the plain fusions and every program under `grid` and
`counters` (megakernels) is checked too."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sirius.runtime.gpu import unavailable_reason
from tests.helpers import KERNELS

REASON = unavailable_reason()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(REASON is not None, reason=f"no usable GPU here: {REASON}")]

CARRY = os.environ.get("SIRIUS_GPU_CARRY")
SLOW = {"bert_base.cu", "nasnet.cu", "resnext50.cu"}  # as tests/fusion/test_fuse_corpus.py
PROGRAMS = sorted(p.name for p in KERNELS.glob("*.cu")) + \
    sorted(f"tvm/{p.name}" for p in (KERNELS / "tvm").glob("*.cu"))


def _plain_root() -> Path:
    root = Path(CARRY)
    return root / "def" if (root / "def").is_dir() else root


MEGAKERNELS = sorted(f"{v}/{d.name}" for v in ("grid", "counters")
                     if CARRY and (Path(CARRY) / v).is_dir()
                     for d in (Path(CARRY) / v).iterdir() if (d / "carry.json").exists())


def _carried(name: str, tmp: Path) -> Path:
    stem = Path(name).stem
    if CARRY:
        d = _plain_root() / stem
        if not (d / "carry.json").exists():
            pytest.skip(f"{d} was not prepared (sirius bench kernels/{name} --prepare {d})")
        return d
    if Path(name).name in SLOW and not os.environ.get("SIRIUS_FUSE_ALL"):
        pytest.skip("large model: set SIRIUS_FUSE_ALL=1")
    if shutil.which("clang-22") is None:
        pytest.skip("no clang-22 to prepare the program here; set SIRIUS_GPU_CARRY")
    from sirius.pipeline import fuse
    from sirius.runtime.gpu.carry import prepare
    from sirius.verify.differential import observed

    res = fuse([KERNELS / name])
    names, rule = observed(res.original.host)
    return prepare(res, tmp, observed=names, observed_rule=rule, seed=7)


@pytest.fixture(scope="module")
def device():
    from sirius.runtime.gpu import GpuDevice

    return GpuDevice()


@pytest.mark.parametrize("name", PROGRAMS)
def test_original_and_fused_match_the_cpu_executor(name: str, tmp_path: Path, device) -> None:
    _check(_carried(name, tmp_path), device)


@pytest.mark.parametrize("name", MEGAKERNELS)
def test_megakernels_match_the_cpu_executor(name: str, device) -> None:
    """The carried `grid` and `counters` megakernels (a wait that is never satisfied hangs the
    kernel: run with pytest's `--timeout`, as docs/gpu.md does)."""
    _check(Path(CARRY) / name, device)


def _check(path: Path, device) -> None:
    from sirius.cli.bench import check_runs, gpu_check
    from sirius.runtime.gpu import carry

    c = carry.load(path)
    runs = check_runs(c, device)
    assert not c.input_mismatches(runs["original"].initial), "inputs differ from the reference"
    rows = gpu_check(c.reference, runs, c.observed, plain=c.reference_plain)
    bad = [f"{r.side} vs {r.against}: {r.buffer}: {r.comparison.mismatches} of "
           f"{r.comparison.elements} differ (max abs {r.comparison.max_abs:.3g}) "
           f"{r.comparison.message}" for r in rows if not r.ok]
    assert not bad, "\n".join(bad)
    assert len(runs["fused"].launches) <= len(runs["original"].launches)
