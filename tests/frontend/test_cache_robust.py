"""The IR cache never makes a run fail (issue 12 item 6): an entry whose files do not match the
content hashes stored with it (truncated, corrupt, written by an older sirius) is rebuilt, as is
one whose IR LLVM rejects; an unwritable cache directory means compiling without a cache, with
one warning. Tests run as root, where chmod does not stop writes: an unwritable cache is a path
under a regular file (mkdir fails with ENOTDIR), or a monkeypatched write that raises EACCES."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import sirius.frontend.cache as cache_mod
from sirius.frontend import compile_program
from tests.helpers import run_cli

PROGRAM = """#include <cuda_runtime.h>
__global__ void twice(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 2.0f * a[i];
}
int main() {
  float *a; cudaMalloc(&a, 1024 * 4);
  twice<<<4, 256>>>(a, 1024);
  static float h[1024]; cudaMemcpy(h, a, 1024 * 4, cudaMemcpyDeviceToHost);
  cudaFree(a); return 0;
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(d))
    # No precompiled headers: the second compile with a set of flags builds one, and IR compiled
    # with it numbers its metadata differently, while these tests compare a rebuilt entry's IR
    # with the first compile's text (the headers have their own tests: test_pch.py)
    monkeypatch.setenv("SIRIUS_PCH", "0")
    monkeypatch.setattr(cache_mod, "_warned", False)
    monkeypatch.delenv(cache_mod._WARNED_ENV, raising=False)
    return d


@pytest.fixture
def program(tmp_path) -> Path:
    p = tmp_path / "twice.cu"
    p.write_text(PROGRAM)
    return p


@pytest.fixture(scope="module")
def compiled_once(tmp_path_factory):
    """The program compiled once into a cache of its own (a miss, both clang compiles): each
    damage test starts from a copy of that cache instead of compiling the program cold again."""
    d = tmp_path_factory.mktemp("compiled-once")
    program = d / "twice.cu"
    program.write_text(PROGRAM)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIRIUS_CACHE_DIR", str(d / "cache"))
        mp.setenv("SIRIUS_PCH", "0")
        first = compile_program(program)
    assert not first.cache_hit
    return program, d / "cache", first


@pytest.fixture
def filled(cache_dir, compiled_once):
    """`cache_dir` holding the entry of `compiled_once`'s program: (program, its first
    compile)."""
    program, template, first = compiled_once
    shutil.copytree(template, cache_dir)
    assert compile_program(program).cache_hit  # the copy serves it
    return program, first


def _entry(cache_dir: Path) -> Path:
    (entry,) = [e for e in (cache_dir / "ir").iterdir() if not e.name.startswith(".")]
    return entry


def test_entry_records_the_hashes_of_its_files(cache_dir, program):
    compile_program(program)
    entry = _entry(cache_dir)
    meta = json.loads((entry / "meta.json").read_text())
    for name in ("device.ll", "host.ll"):
        assert meta["sha256"][name] == cache_mod.sha256((entry / name).read_bytes())


@pytest.mark.parametrize("damage", ["truncate device", "truncate host", "empty meta",
                                    "old format", "no host"])
def test_damaged_entry_is_rebuilt(cache_dir, filled, damage):
    program, first = filled
    entry = _entry(cache_dir)
    if damage.startswith("truncate"):
        f = entry / f"{damage.split()[1]}.ll"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    elif damage == "empty meta":
        (entry / "meta.json").write_text("")
    elif damage == "old format":  # before hashes were stored: deps only
        meta = json.loads((entry / "meta.json").read_text())
        (entry / "meta.json").write_text(json.dumps({"deps": meta["deps"]}))
    else:
        (entry / "host.ll").unlink()
    again = compile_program(program)
    assert not again.cache_hit  # recompiled, not trusted
    assert again.device_ir == first.device_ir and again.host_ir == first.host_ir
    third = compile_program(program)  # and the rebuilt entry serves the next run
    assert third.cache_hit and third.device_ir == first.device_ir


def test_entry_llvm_rejects_is_rebuilt(cache_dir, filled):
    # hashes that match, over IR that does not parse (a cache written by a broken build)
    program, first = filled
    entry = _entry(cache_dir)
    bad = b"this is not LLVM IR\n"
    (entry / "device.ll").write_bytes(bad)
    meta = json.loads((entry / "meta.json").read_text())
    meta["sha256"]["device.ll"] = cache_mod.sha256(bad)
    (entry / "meta.json").write_text(json.dumps(meta))
    again = compile_program(program)
    assert not again.cache_hit and again.device_ir == first.device_ir
    assert compile_program(program).cache_hit


def test_truncated_entry_through_the_cli(cache_dir, program):
    assert run_cli("inspect", str(program), "-q").returncode == 0
    entry = _entry(cache_dir)
    (entry / "device.ll").write_text((entry / "device.ll").read_text()[:200])
    proc = run_cli("inspect", str(program), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "twice" in proc.stdout and proc.stderr == ""


def test_cache_under_a_file_compiles_and_warns_once(tmp_path, program, monkeypatch):
    # `verify` exercises every cache: the IR cache, the private include headers, the CPU
    # executor's runtime library and its JIT objects
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(blocker / "cache"))
    proc = run_cli("verify", str(program), "-q", "--order", "forward")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning:") == 1 and "[cache-unwritable]" in proc.stderr
    assert f"cannot write the sirius cache in {blocker / 'cache'}" in proc.stderr
    assert "verdict: OK" in proc.stdout
    assert blocker.read_text() == ""


def test_unwritable_cache_directory_warns_once(cache_dir, program, monkeypatch, capsys):
    # what chmod a-w would do for a user other than root: creating the entry fails with EACCES
    real = cache_mod.tempfile.mkdtemp

    def refuse(*args, **kwargs):
        if str(kwargs.get("dir", "")).startswith(str(cache_dir)):
            raise PermissionError(13, "Permission denied", str(cache_dir / "ir"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_mod.tempfile, "mkdtemp", refuse)
    other = program.with_name("other.cu")
    other.write_text(PROGRAM.replace("2.0f", "3.0f"))
    a, b = compile_program(program), compile_program(other)
    assert not a.cache_hit and not b.cache_hit and "twice" in a.device_ir
    err = capsys.readouterr().err
    assert err.count("[cache-unwritable]") == 1 and "Permission denied" in err
    assert list((cache_dir / "ir").iterdir()) == []
