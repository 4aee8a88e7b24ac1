"""The executor's module cache (sirius/runtime/cpu/jit.py): the rewritten module is kept by the
device IR it came from, so a second load builds no view and rewrites nothing, and processes that
load the same module at once build it once."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from sirius.analysis.irview import build_view
from sirius.runtime.cpu import jit
from sirius.runtime.cpu.jit import JitModule
from tests.runtime.execsupport import analysed


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path))
    return tmp_path / "jit"


def _unwanted():
    raise AssertionError("the view was built although the rewritten module is cached")


def test_a_second_load_reads_the_rewritten_module_from_the_cache(fresh_cache) -> None:
    program, _, _ = analysed("programs/symbol_workers.cu")
    built: list[int] = []

    def view():
        built.append(1)
        return build_view(program.device_module)

    first = JitModule(view, text=program.device_ir)
    assert built == [1]
    again = JitModule(_unwanted, text=program.device_ir)
    assert again.host == first.host and again.objects == first.objects
    # bounds checks are another module: rewritten again
    checked = JitModule(view, instrument=True, text=program.device_ir)
    assert built == [1, 1] and checked.host.text != first.host.text
    # a damaged entry is rebuilt, not trusted
    for f in fresh_cache.glob("*.host"):
        f.write_bytes(f.read_bytes()[:100])
    rebuilt = JitModule(view, text=program.device_ir)
    assert len(built) == 3 and rebuilt.host == first.host


def test_a_view_builder_needs_the_ir_text() -> None:
    with pytest.raises(TypeError, match="IR text"):
        JitModule(_unwanted)


def _build_slowly(path: str, log: str, out: str) -> None:
    def make() -> bytes:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(1.0)
        return b"object bytes"

    got = jit._cached(Path(path), make, bytes, bytes)
    Path(out).write_bytes(got)


def test_processes_that_need_one_module_build_it_once(tmp_path) -> None:
    ctx = mp.get_context("fork")
    log = tmp_path / "log"
    procs = [ctx.Process(target=_build_slowly,
                         args=(str(tmp_path / "m.o"), str(log), str(tmp_path / f"out{i}")))
             for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert log.read_text() == "built\n"  # one built it, the others waited and read it
    assert all((tmp_path / f"out{i}").read_bytes() == b"object bytes" for i in range(3))


def test_a_tiny_program_is_compiled_at_o0_a_small_one_at_o1_a_large_one_at_o2(monkeypatch):
    from sirius.runtime.cpu.device import SMALL_PROGRAM_BYTES, TINY_PROGRAM_BYTES, jit_speed

    monkeypatch.delenv("SIRIUS_JIT_SPEED", raising=False)
    assert jit_speed(1024) == 0
    assert jit_speed(TINY_PROGRAM_BYTES - 1) == 0
    assert jit_speed(TINY_PROGRAM_BYTES) == 1
    assert jit_speed(SMALL_PROGRAM_BYTES - 1) == 1
    assert jit_speed(SMALL_PROGRAM_BYTES) == 2
    assert jit_speed(None) == 2  # size unknown: a run that may be long
    monkeypatch.setenv("SIRIUS_JIT_SPEED", "2")
    assert jit_speed(1024) == 2


@pytest.mark.parametrize("name", ["programs/device_counter.cu", "programs/warp_shuffle.cu",
                                  "programs/warp_divergent.cu"])
def test_the_three_levels_are_three_objects_with_the_same_results(name, tmp_path, monkeypatch):
    # same module, same counters and outputs at every level; the objects are cached apart
    # (warp_shuffle, warp_divergent: fibers, whose stacks must hold O0's larger frames)
    from sirius.runtime.cpu import device
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(device, "_MODULES", {})  # no module this process compiled before
    program, kernels, host = analysed(name)
    outs = []
    for speed in ("0", "1", "2"):
        monkeypatch.setenv("SIRIUS_JIT_SPEED", speed)
        r = run_host_program(host, program, kernels, CpuDevice(check_bounds=True))
        outs.append(({k: v.tobytes() for k, v in r.final.items()},
                     [(x.stats.instructions, x.stats.global_load_bytes) for x in r.launches]))
    assert outs[0] == outs[1] == outs[2]
    assert len(list((tmp_path / "jit").glob("*.o"))) == 3


def test_a_module_over_the_size_limit_stops_with_the_reason(tmp_path, monkeypatch):
    from sirius.diagnostics import SiriusError
    from sirius.runtime.cpu import device
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(device, "_MODULES", {})
    monkeypatch.setenv("SIRIUS_JIT_MAX_MB", "0.001")  # 1 KB: every module is over it
    program, kernels, host = analysed("programs/device_counter.cu")
    with pytest.raises(SiriusError, match=r"is \d+ MB of LLVM IR after its rewrite, over the "
                                          r"0.001 MB .*SIRIUS_JIT_MAX_MB"):
        run_host_program(host, program, kernels, CpuDevice())
    assert not list((tmp_path / "jit").glob("*.host"))  # nothing cached
    monkeypatch.delenv("SIRIUS_JIT_MAX_MB")
    run_host_program(host, program, kernels, CpuDevice())
