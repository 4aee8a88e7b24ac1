"""Runs every lit test in tests/lit/ (fuse-kernels.ll, one `<pass-name>.ll` per post-fusion pass)
so that `make test` covers them; a new `.ll` file there is picked up without an edit here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import zygote_socket

ROOT = Path(__file__).resolve().parents[2]
LIT_TESTS = sorted((ROOT / "tests/lit").glob("*.ll"))


def test_lit_tests_found():
    assert {"fuse-kernels.ll", "llvm-opt.ll"} <= {p.name for p in LIT_TESTS}


@pytest.mark.parametrize("path", LIT_TESTS, ids=lambda p: p.name)
def test_lit(path: Path):
    bindir = str(Path(sys.executable).parent)
    lit = shutil.which("lit", path=bindir)
    if lit is None or shutil.which("filecheck", path=bindir) is None:
        pytest.skip("lit and filecheck are not installed (dev extra)")
    env = dict(os.environ)
    sock = zygote_socket()
    if sock is not None:
        env["SIRIUS_TEST_ZYGOTE"] = sock
    r = subprocess.run([lit, "-q", str(path)], capture_output=True, text=True, cwd=ROOT,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
