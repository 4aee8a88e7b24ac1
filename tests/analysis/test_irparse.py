"""The IR view read from a module's text (sirius/analysis/irparse.py) against the view walked
through llvmlite (irview._build_view): the same functions, blocks, instructions, types,
constants and operands, value for value, on every corpus module and on a module with every
instruction form the reader knows. `SIRIUS_IRVIEW_CHECK=1` makes every `build_view` of a run
compare the two (the whole suite passed that way when the reader came in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sirius.analysis import irparse, irview
from sirius.analysis.irview import Const, ConstExpr, build_view
from sirius.frontend import compile_program, llvmctx

ROOT = Path(__file__).resolve().parent.parent.parent
FORMS = Path(__file__).resolve().parent / "data" / "irparse_forms.ll"
CORPUS = sorted([*ROOT.glob("kernels/*.cu"), *ROOT.glob("kernels/tvm/*.cu"),
                 *ROOT.glob("kernels/tvm/fp16/*.cu")])
# walking these through llvmlite (the reference) takes 11-71 s each on the 2-core machine;
# `make test-all` reads them, `make test` the rest (fp16 included: lstm_fp16)
SLOW_MODULES = {"kernels/tvm/fp16/bert_layer_fp16.cu", "kernels/tvm/fp16/resnext_block_fp16.cu",
                "kernels/tvm/fp16/bert_qkv_fp16.cu", "kernels/tvm/resnext50.cu",
                "kernels/tvm/bert_base.cu", "kernels/tvm/nasnet.cu"}


def _both(text: str, only=None):
    module = llvmctx.parse(text)
    printed = str(module)
    return irview._build_view(module, printed, only), irparse.read_view(printed, only)


def test_every_form_reads_as_llvmlite_reports_it() -> None:
    ref, got = _both(FORMS.read_text())
    assert irparse.differences(ref, got) == []
    k = got.functions["k"]
    ins = {i.name: i for b in k.blocks for i in b.instrs if i.name}
    # the facts llvmlite reports that the text does not say plainly
    assert isinstance(ins["cmp"].operands[1], Const) and ins["cmp"].operands[1].value == 2**32 - 5
    assert ins["big"].operands[1].value == -2**63          # 64 bits: signed
    assert ins["t"].operands[0].value == 1                 # i1 true
    assert ins["sv"].type == "%struct.S = type { i32, float }"
    assert ins["sf"].type == "float" and ins["vc"].type == "<4 x i1>"
    assert len(ins["sh"].operands) == 2 and ins["sh"].type == "<2 x i32>"  # no mask operand
    assert isinstance(ins["b"].operands[0], ConstExpr)
    assert ins["hh"].operands[1].value == 1.0 and ins["bf"].operands[1].value == 2.0
    alloca = k.entry.instrs[0]
    assert alloca.opcode == "alloca" and alloca.operands[0].value == 4
    br = next(i for b in k.blocks for i in b.instrs if i.opcode == "br" and len(i.operands) == 3)
    assert [s.name for s in br.successors()] == ["one", "def"]
    assert ins["hf"].operands[-1] is got.functions["helper fn"]


def test_a_partial_view_reads_as_llvmlite_reports_it() -> None:
    ref, got = _both(FORMS.read_text(), only={"helper fn"})
    assert irparse.differences(ref, got) == []
    assert got.functions["k"].is_declaration and not got.functions["helper fn"].is_declaration


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.slow) if str(p.relative_to(ROOT)) in SLOW_MODULES else p
    for p in CORPUS], ids=lambda p: str(p.relative_to(ROOT)))
def test_corpus_modules_read_as_llvmlite_reports_them(path: Path) -> None:
    program = compile_program([path])
    for module in (program.device_module, program.host_module):
        printed = str(module)
        ref = irview._build_view(module, printed, None)
        assert irparse.differences(ref, irparse.read_view(printed)) == []


@pytest.mark.parametrize("text", [
    '@a = alias i32, ptr @b\n@b = global i32 0\n',
    'declare void @f()\ndefine void @g() {\n  call void @f() [ "deopt"(i32 0) ]\n  ret void\n}\n',
    'define <2 x ptr> @g(<2 x ptr> %p) {\n'
    '  %q = getelementptr i8, <2 x ptr> %p, <2 x i64> <i64 1, i64 2>\n  ret <2 x ptr> %q\n}\n',
])
def test_a_form_the_reader_does_not_know_is_viewed_through_llvmlite(text: str) -> None:
    printed = str(llvmctx.parse(text))
    with pytest.raises(irparse.Unsupported):
        irparse.read_view(printed)
    irview._RECENT.clear()
    irview._WHOLE.clear()
    view = build_view(llvmctx.parse(text))  # the fallback: the same view, from llvmlite
    assert view.functions.keys() == irview._build_view(llvmctx.parse(text), printed, None
                                                       ).functions.keys()


def test_the_check_mode_sees_a_wrong_reading(monkeypatch) -> None:
    """SIRIUS_IRVIEW_CHECK=1 compares the two views of every module; a reader that got one
    operand wrong fails the build instead of giving a wrong view."""
    real = irparse._Reader._constant

    def wrong(self, ty, tok):
        got = real(self, ty, tok)
        if isinstance(got, Const) and got.value == 2.0:
            return Const("const", "", got.type, value=3.0)
        return got

    monkeypatch.setattr(irparse._Reader, "_constant", wrong)
    monkeypatch.setenv("SIRIUS_IRVIEW_CHECK", "1")
    irview._RECENT.clear()
    irview._WHOLE.clear()
    with pytest.raises(AssertionError, match="differs from llvmlite"):
        build_view(llvmctx.parse(FORMS.read_text()))
    monkeypatch.delenv("SIRIUS_IRVIEW_CHECK")
    irview._RECENT.clear()
    irview._WHOLE.clear()
    assert build_view(llvmctx.parse(FORMS.read_text()))  # unchecked, the reader is trusted
