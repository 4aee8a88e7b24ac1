"""The interpreter of a `counters` megakernel's helpers (sirius/runtime/cpu/helperexec.py): a
spin yields with what it reads and resumes where it stopped, stores are seen, accesses are
checked, a runaway and an unknown instruction are refused."""

from __future__ import annotations

import pytest

from sirius.analysis.irparse import read_view
from sirius.runtime.cpu import helperexec as H

MODULE = """
@flags = dso_local addrspace(1) global [4 x i32] zeroinitializer, align 4

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)

; waits until flags[p] >= want (thread 0 only), then a barrier
define void @wait(ptr addrspace(1) %f, i32 %p, i32 %want) {
entry:
  %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %lead = icmp eq i32 %tx, 0
  br i1 %lead, label %spin, label %done
spin:
  %q = getelementptr inbounds i32, ptr addrspace(1) %f, i32 %p
  %cur = load atomic volatile i32, ptr addrspace(1) %q syncscope("device") acquire, align 4
  %diff = sub i32 %cur, %want
  %early = icmp slt i32 %diff, 0
  br i1 %early, label %spin, label %done
done:
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  ret void
}

; flags[block] = v
define void @signal(ptr addrspace(1) %f, i32 %v) {
entry:
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %q = getelementptr inbounds i32, ptr addrspace(1) %f, i32 %b
  store atomic volatile i32 %v, ptr addrspace(1) %q syncscope("device") release, align 4
  ret void
}

; counts up forever
define void @runaway() {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %n, %loop ]
  %n = add i32 %i, 1
  br label %loop
}

define void @floaty(i32 %x) {
entry:
  %y = uitofp i32 %x to float
  ret void
}
"""


def _code(name: str) -> H.Code:
    return H.compile_helper(read_view(MODULE).functions[name])


def _env(block: int = 0, tid: int = 0) -> H.Env:
    return H.Env((tid, 0, 0), (block, 0, 0), (32, 1, 1), (4, 1, 1))


def _memory() -> H.Memory:
    return H.Memory({"flags": (bytearray(16), True)})


def test_a_spin_yields_with_what_it_reads_and_resumes_after_a_store():
    mem = _memory()
    w = H.Fiber(_code("wait"), (("flags", 0), 2, 1), _env(), mem)
    assert w.resume() is False
    assert w.blocked == {("flags", 8)}  # flags[2]
    assert w.flag_checks == 0  # the spin's loads do not count
    # block 1 signals another flag: still waiting
    s = H.Fiber(_code("signal"), (("flags", 0), 1), _env(block=1), mem)
    assert s.resume() is True and s.stored == [("flags", 4)]
    assert w.resume() is False
    # block 2 raises the flag waited for
    s = H.Fiber(_code("signal"), (("flags", 0), 1), _env(block=2), mem)
    assert s.resume() is True and s.stored == [("flags", 8)]
    assert w.resume() is True
    assert w.flag_checks == 1
    assert mem.load(("flags", 8), 32) == 1


def test_an_access_outside_the_global_is_a_fault():
    s = H.Fiber(_code("signal"), (("flags", 0), 7), _env(block=4), _memory())
    with pytest.raises(H.Fault, match="byte 16 of @flags, which has 16 bytes"):
        s.resume()


def test_a_loop_that_never_comes_back_to_a_state_is_a_runaway(monkeypatch):
    monkeypatch.setattr(H, "MAX_STEPS", 1000)
    with pytest.raises(H.Fault, match="runaway ran 1,000 instructions"):
        H.Fiber(_code("runaway"), (), _env(), _memory()).resume()


def test_an_instruction_outside_the_subset_is_refused_naming_it():
    with pytest.raises(H.Unsupported, match=r"the instruction uitofp in `%y = uitofp"):
        _code("floaty")


def test_threads_other_than_the_first_only_reach_the_barrier():
    H.check_idle(_code("wait"), (("flags", 0), 2, 1), _env(tid=31), _memory())
    # the signal stores in every thread: refused
    with pytest.raises(H.Fault, match="memory work in threads other than the block's first"):
        H.check_idle(_code("signal"), (("flags", 0), 1), _env(tid=31), _memory())
