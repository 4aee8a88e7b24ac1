"""The executor's module compiled in parts (sirius/runtime/cpu/split.py, jit.py): the cut module
defines what the whole one does, each global once, and programs run on it exactly as on the
whole module."""

from __future__ import annotations

import ctypes
import pickle

import pytest

from sirius.diagnostics import SiriusError
from sirius.frontend import llvmctx
from sirius.runtime.cpu import jit, split
from tests.runtime.execsupport import analysed

MODULE = """
%pair = type { i32, i32 }
$shared_odr = comdat any

@counter = internal global i32 0, align 4
@table = private unnamed_addr constant [2 x i32] [i32 10, i32 20], align 4
@pairs = global %pair zeroinitializer, align 4

define internal i32 @helper(i32 %x) {
  %p = getelementptr [2 x i32], ptr @table, i64 0, i64 1
  %t = load i32, ptr %p, align 4
  %r = add i32 %x, %t
  ret i32 %r
}

define linkonce_odr i32 @shared_odr(i32 %x) comdat {
  %r = mul i32 %x, 3
  ret i32 %r
}

define i32 @bump(i32 %x) {
  %h = call i32 @helper(i32 %x)
  %o = call i32 @shared_odr(i32 %h)
  %c = load i32, ptr @counter, align 4
  %n = add i32 %c, %o
  store i32 %n, ptr @counter, align 4
  ret i32 %n
}

define i32 @read(i32 %x) {
  %h = call i32 @helper(i32 %x)
  %c = load i32, ptr @counter, align 4
  %s = add i32 %c, %h
  %q = getelementptr %pair, ptr @pairs, i64 0, i32 1
  store i32 %s, ptr %q, align 4
  ret i32 %s
}
"""


def _text() -> str:
    return str(llvmctx.parse(MODULE))  # printed by LLVM, as the executor's module is


def _defines(text: str) -> set[str]:
    m = llvmctx.parse(text)
    return {f.name for f in m.functions if not f.is_declaration}


def test_a_module_is_cut_into_parts_that_define_each_global_once() -> None:
    parts = split.split(_text(), 2)
    assert len(parts) == 2
    defined = [_defines(p) for p in parts]
    # each external function in one part; the local helpers copied where they are called
    assert {"bump", "read"} <= defined[0] | defined[1]
    assert not ({"bump", "read"} & defined[0] & defined[1])
    assert all("helper" in d for d in defined)
    for p in parts:
        llvmctx.parse(p).verify()
    globals_ = [{g.name: g.is_declaration for g in llvmctx.parse(p).global_variables}
                for p in parts]
    assert globals_[0] == {"counter": False, "table": False, "pairs": False}
    assert all(globals_[1][name] for name in globals_[1])  # declared only
    assert "linkonce_odr" not in "".join(parts[1:]) or "comdat" not in parts[1]


def test_the_parts_share_their_globals_in_one_engine() -> None:
    llvm = jit._target()[0]
    objs = jit._compile_parts(split.split(_text(), 2), 2)
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), jit._machine())
    files = [llvm.ObjectFileRef.from_data(o) for o in objs]
    for f in files:
        ee.add_object_file(f)
    ee.finalize_object()
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)
    bump, read = fn(ee.get_function_address("bump")), fn(ee.get_function_address("read"))
    assert bump(1) == (1 + 20) * 3          # counter = 63
    assert read(2) == 63 + 22               # reads the counter bump wrote
    pairs = ee.get_global_value_address("pairs")
    assert ctypes.c_int32.from_address(pairs + 4).value == 85


@pytest.mark.parametrize("text", [
    "define i32 @only(i32 %x) {\n  ret i32 %x\n}\n",  # one cluster
    "@a = alias i32, ptr @g\n@g = global i32 0\ndefine i32 @f() {\n  ret i32 0\n}\n"
    "define i32 @h() {\n  ret i32 1\n}\n",  # an alias: not cut
    "@0 = private constant i32 7\ndefine i32 @f() {\n  %v = load i32, ptr @0\n  ret i32 %v\n}\n"
    "define i32 @h() {\n  ret i32 1\n}\n",  # an unnamed global: numbered apart in each part
])
def test_what_cannot_or_need_not_be_cut_stays_whole(text) -> None:
    printed = str(llvmctx.parse(text))
    assert split.split(printed, 4) == [printed]
    assert split.split(_text(), 1) == [_text()]


def test_the_number_of_parts(monkeypatch) -> None:
    monkeypatch.delenv("SIRIUS_JIT_PARTS", raising=False)
    assert jit.jit_parts(jit.SPLIT_MIN_BYTES - 1) == 1
    assert 1 <= jit.jit_parts(jit.SPLIT_MIN_BYTES) <= jit.JIT_MAX_PARTS
    monkeypatch.setenv("SIRIUS_JIT_PARTS", "3")
    assert jit.jit_parts(10) == 3
    for bad in ("0", "two"):
        monkeypatch.setenv("SIRIUS_JIT_PARTS", bad)
        with pytest.raises(SiriusError, match="SIRIUS_JIT_PARTS"):
            jit.jit_parts(10)


@pytest.mark.parametrize("name", ["matmul_bias_act.cu", "programs/device_counter.cu",
                                  "programs/device_array.cu", "programs/warp_shuffle.cu",
                                  "programs/libm.cu", "programs/index64.cu",
                                  "programs/atomics.cu", "programs/vector_ldst.cu",
                                  "programs/warp_divergent.cu"])
def test_a_program_runs_the_same_on_a_module_compiled_in_parts(name, tmp_path, monkeypatch):
    from sirius.runtime.cpu import device
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    program, kernels, host = analysed(name)
    results = []
    for parts in ("1", "3"):
        monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path / parts))
        monkeypatch.setattr(device, "_MODULES", {})
        monkeypatch.setenv("SIRIUS_JIT_PARTS", parts)
        r = run_host_program(host, program, kernels, CpuDevice(check_bounds=True))
        results.append(({k: v.tobytes() for k, v in r.final.items()},
                        [(x.stats.instructions, x.stats.global_load_bytes,
                          x.stats.global_store_bytes, x.stats.barriers) for x in r.launches]))
        counts = [len(pickle.loads(f.read_bytes()))
                  for f in (tmp_path / parts / "jit").glob("*.o")]
        assert counts and (max(counts) == 1 if parts == "1" else max(counts) > 1)
    assert results[0] == results[1]


def test_a_part_that_does_not_compile_leaves_the_module_whole(tmp_path, monkeypatch, capfd):
    # a bug in the split must cost time, never a wrong or missing module
    from sirius.runtime.cpu import device
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    program, kernels, host = analysed("matmul_bias_act.cu")
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path / "whole"))
    monkeypatch.setattr(device, "_MODULES", {})
    want = run_host_program(host, program, kernels, CpuDevice(check_bounds=True))
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path / "broken"))
    monkeypatch.setattr(device, "_MODULES", {})
    monkeypatch.setenv("SIRIUS_JIT_PARTS", "2")
    monkeypatch.setattr(split, "split", lambda text, n: [text, "this is not LLVM IR\n"])
    got = run_host_program(host, program, kernels, CpuDevice(check_bounds=True))
    assert "compiling the CPU module of" in capfd.readouterr().err
    assert {k: v.tobytes() for k, v in got.final.items()} == \
        {k: v.tobytes() for k, v in want.final.items()}
    (obj,) = (tmp_path / "broken" / "jit").glob("*.o")
    assert len(pickle.loads(obj.read_bytes())) == 1
