"""`sirius fuse` verifies what it writes (issue 12 item 3): original and fused run on the CPU
executor (forward, reverse, random:SEED) before anything is written; a fused program that
differs is refused with exit 1 and the mismatch shown; `--no-verify` skips the check; plan.json
and report.md say which check ran. The CLI runs as a subprocess where it can; a wrong fusion
has to be planted, which is done in-process (sirius.cli.main with the fusion step wrapped)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import ScalarArg
from tests.helpers import ROOT, run_cli

CHAIN = "kernels/elementwise_chain.cu"  # 4 launches -> 1; every buffer 4096 floats
N = 4096
PROGRAMS = ROOT / "tests" / "fusion" / "verify_programs"
FILES = ["fused.ll", "fused.ptx", "plan.json", "report.md"]


def test_fuse_verifies_by_default_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("fuse", CHAIN, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == FILES
    for order in ("forward", "reverse", "random:7"):
        assert f"running the fused program ({order} order, bounds checked)" in proc.stderr
    # every fused order agrees with the forward original: it is not run a second time
    assert "running the original program again" not in proc.stderr
    v = json.loads((out / "plan.json").read_text())["verification"]
    assert (v["ran"], v["status"], v["ok"]) == (True, "ok", True)
    assert (v["orders"], v["original_orders"], v["seed"]) == (
        ["forward", "reverse", "random:7"], ["forward"], 7)
    assert v["compared"] == ["d_out"] and v["check_bounds"] is True and v["failed"] == []
    report = (out / "report.md").read_text()
    assert "- verification: CPU executor, seed 7: original run in forward order, " \
           "fused in forward, reverse, random:7 order with bounds checked; compared: d_out: " \
           "OK" in report


def test_seed_is_the_verification_seed(tmp_path: Path) -> None:
    proc = run_cli("fuse", CHAIN, "-o", str(tmp_path / "out"), "-q", "--seed", "11", "--json")
    assert proc.returncode == 0, proc.stderr
    v = json.loads(proc.stdout)["verification"]
    assert v["seed"] == 11 and v["orders"][-1] == "random:11"


def test_no_verify_writes_without_running_anything(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("fuse", CHAIN, "-o", str(out), "--no-verify")
    assert proc.returncode == 0, proc.stderr
    assert "running the" not in proc.stderr
    v = json.loads((out / "plan.json").read_text())["verification"]
    assert v == {"ran": False, "reason": "not verified (--no-verify)"}
    assert "- verification: not verified (--no-verify)" in (out / "report.md").read_text()


def test_nothing_fused_needs_no_run(tmp_path: Path) -> None:
    # one launch: the "fused" program is the original, there is nothing to compare
    out = tmp_path / "out"
    proc = run_cli("fuse", str(PROGRAMS / "scatter.cu"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "running the" not in proc.stderr
    v = json.loads((out / "plan.json").read_text())["verification"]
    assert v["ran"] is False and v["reason"].startswith("not needed")


def test_order_dependent_original_is_written_with_a_warning(tmp_path: Path) -> None:
    # race.cu: `cell` is raced on by two threads; the fused scale/shift chain is right
    out = tmp_path / "out"
    proc = run_cli("fuse", str(PROGRAMS / "race.cu"), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("[order-dependent-original]") == 1
    assert "in cell (1 of 1 elements)" in proc.stderr
    v = json.loads((out / "plan.json").read_text())["verification"]
    assert v["status"] == "original-order-dependent" and v["order_dependent"] == ["cell"]
    assert v["ok"] is False and v["failed"] == [] and v["compared"] == ["z", "cell"]
    assert "INCONCLUSIVE for cell" in (out / "report.md").read_text()


# a wrong fusion is refused ----------------------------------------------------------------------

def _shorten_fused_launch(res, n: int):
    """The fused result with its one fused launch told to process `n` elements, not N."""
    (launch,) = [op for op in res.host.launches() if op.kernel.startswith("sirius_")]
    args = tuple(ScalarArg(a.type, Expr(n)) if isinstance(a, ScalarArg) and a.value == Expr(N)
                 else a for a in launch.args)
    assert args != launch.args
    short = dataclasses.replace(launch, args=args)
    ops = tuple(short if op is launch else op for op in res.host.ops)
    res.host = dataclasses.replace(res.host, ops=ops)
    return res


@pytest.fixture
def planted(monkeypatch):
    """`sirius fuse` whose fused program skips the last 256 elements of d_out (the tests run
    it with --no-postopt: host-constants would fold n into the kernel, and the planted bug, a
    launch argument changed after fusion, would change nothing)."""
    import sirius.cli.fuse as cli_fuse

    real = cli_fuse.fuse_from_args
    monkeypatch.setattr(cli_fuse, "fuse_from_args",
                        lambda args, say, *ref: _shorten_fused_launch(real(args, say, *ref),
                                                                      N - 256))


def _expected_first_mismatch() -> tuple[str, str]:
    """(fused, original) values of d_out[3840]: the fused run leaves the seeded input there,
    the original computes ((x * 2 + bias) relu)^2; both runs of the executor with seed 7."""
    from sirius.pipeline import fuse
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    res = fuse([ROOT / CHAIN])
    o = res.original
    ref = run_host_program(o.host, o.program, o.kernels, CpuDevice(seed=7), seed=7)
    return str(ref.initial["d_out"][N - 256]), str(ref.final["d_out"][N - 256])


def test_wrong_fusion_is_refused_and_shown(tmp_path: Path, planted, capsys) -> None:
    from sirius.cli import main

    out = tmp_path / "out"
    assert main(["fuse", str(ROOT / CHAIN), "-o", str(out), "-q", "--no-postopt"]) == 1
    err = capsys.readouterr().err
    assert "the fused program does not compute what the original does" in err
    assert "nothing written" in err and "Traceback" not in err
    got, want = _expected_first_mismatch()
    assert np.float32(got) != np.float32(want)
    for order in ("forward", "reverse", "random:7"):
        assert f"{order}, d_out: 256 of 4096 elements differ; first at [3840]: fused {got}, " \
               f"original {want}" in err
    assert not out.exists()  # created for the check, removed again: nothing was written


def test_wrong_fusion_leaves_an_existing_directory_as_it_was(tmp_path: Path, planted,
                                                              capsys) -> None:
    from sirius.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    assert main(["fuse", str(ROOT / CHAIN), "-o", str(out), "-q", "--json", "--no-postopt"]) == 1
    assert capsys.readouterr().out == ""
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_no_verify_writes_even_the_wrong_fusion(tmp_path: Path, planted) -> None:
    from sirius.cli import main

    out = tmp_path / "out"
    assert main(["fuse", str(ROOT / CHAIN), "-o", str(out), "-q", "--no-verify",
                 "--no-postopt"]) == 0
    assert sorted(p.name for p in out.iterdir()) == FILES
