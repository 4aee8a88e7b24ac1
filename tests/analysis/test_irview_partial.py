"""`build_view(module, only=...)`: a view of some functions of a module and everything they
reference, the same as the whole module's view for those, bodiless for the rest."""

from __future__ import annotations

import llvmlite.binding as llvm
import pytest

from sirius.analysis import irview
from sirius.analysis.irview import build_view

IR = r"""
target triple = "nvptx64-nvidia-cuda"

@table = internal addrspace(1) global [4 x float] zeroinitializer

define internal float @helper(float %x) {
  %y = fmul float %x, 2.0
  %z = call float @"deep helper"(float %y)
  ret float %z
}

define internal float @"deep helper"(float %x) {
  %y = fadd float %x, 1.0
  ret float %y
}

define internal float @unused(float %x) {
  ret float %x
}

define ptx_kernel void @k1(ptr %p) {
entry:
  %v = load float, ptr %p
  %w = call float @helper(float %v)
  store float %w, ptr %p
  ret void
}

define ptx_kernel void @k2(ptr %p) {
entry:
  %v = call float @unused(float 1.0)
  store float %v, ptr %p
  ret void
}

declare float @llvm.fabs.f32(float)
"""


def _shape(view, name):
    f = view.functions[name]
    return (f.is_declaration, f.calling_conv, f.text,
            [(i.name, i.opcode, i.type, i.text, [o.kind for o in i.operands])
             for b in f.blocks for i in b.instrs])


def test_a_partial_view_holds_the_roots_and_what_they_reference() -> None:
    irview._RECENT.clear()  # no view of this module from another test
    irview._WHOLE.clear()
    mod = llvm.parse_assembly(IR)
    part, whole = build_view(mod, only={"k1"}), build_view(mod)
    assert set(part.functions) == set(whole.functions)  # every name is known (name clashes)
    for name in ("k1", "helper", "deep helper"):
        assert not part.functions[name].is_declaration
        assert _shape(part, name) == _shape(whole, name)
    for name in ("k2", "unused"):  # not referenced from k1: no body
        assert part.functions[name].is_declaration and not part.functions[name].blocks
        assert not whole.functions[name].is_declaration
    assert part.globals.keys() == whole.globals.keys()
    # a call resolves to the callee's entry of the same view
    call = next(i for i in part.functions["k1"].entry.instrs if i.opcode == "call")
    assert call.operands[-1] is part.functions["helper"]


def test_a_whole_view_serves_a_part_of_its_module() -> None:
    """Once the whole module is viewed (the analysis), a view of some of its functions (code
    generation's) is that whole view, not another walk of the module."""
    irview._RECENT.clear()
    irview._WHOLE.clear()
    mod = llvm.parse_assembly(IR)
    whole = build_view(mod)
    assert build_view(llvm.parse_assembly(IR), only={"k1"}) is whole


def test_roots_that_are_not_defined_are_ignored() -> None:
    irview._RECENT.clear()
    irview._WHOLE.clear()
    mod = llvm.parse_assembly(IR)
    part = build_view(mod, only={"llvm.fabs.f32", "nothing"})
    assert all(f.is_declaration for f in part.functions.values())


# bert_qkv_fp16 (inline PTX) is the slowest module to walk through llvmlite: make test-all reads
# it (test_irparse.py compares its whole view with llvmlite's there too)
@pytest.mark.parametrize("programs, least", [
    (("kernels/lstm_cell.cu", "kernels/tvm/bert_qkv.cu"), 1000),
    pytest.param(("kernels/tvm/fp16/bert_qkv_fp16.cu",), 1000, marks=pytest.mark.slow)])
def test_names_and_opcodes_read_from_the_text_are_llvmlites(programs, least) -> None:
    """build_view reads each instruction's name and opcode from its printed text; on the
    host and device modules of real programs (hand-written, TVM, fp16 with inline PTX) they are
    what llvmlite says, instruction by instruction."""
    from pathlib import Path

    from sirius.frontend.compile import compile_program

    root = Path(__file__).parents[2]
    quoted = IR + 'define void @q() {\n  %"a b" = add i32 1, 2\n  %"c\\22d" = add i32 %"a b", 1\n' \
        "  ret void\n}\n"
    modules = [llvm.parse_assembly(quoted)]
    for name in programs:
        p = compile_program([root / name], arch="sm_80", extra_flags=[], use_cache=True)
        modules += [p.host_module, p.device_module]
    checked = 0
    for mod in modules:
        view = build_view(mod)
        for fref in mod.functions:
            if fref.is_declaration:
                continue
            got = [i for b in view.functions[fref.name].blocks for i in b.instrs]
            want = [i for b in fref.blocks for i in b.instructions]
            assert [(i.name, i.opcode) for i in got] == [(i.name, i.opcode) for i in want]
            checked += len(got)
    assert checked > least
