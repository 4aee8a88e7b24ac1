"""Runs the fuse-kernels lit test (tests/lit/fuse-kernels.ll) so that `make test` covers it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_fuse_kernels_lit():
    bindir = str(Path(sys.executable).parent)
    lit = shutil.which("lit", path=bindir)
    if lit is None or shutil.which("filecheck", path=bindir) is None:
        pytest.skip("lit and filecheck are not installed (dev extra)")
    r = subprocess.run([lit, "-q", str(ROOT / "tests/lit/fuse-kernels.ll")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
