"""The pass manager (sirius/postopt/manager.py): verification after every pass, the parsed module
handed over, required facts, print-after."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import ClassVar

import llvmlite.binding as llvm
import pytest

from sirius.analysis.host.model import HostProgram
from sirius.postopt import (
    IRError,
    LlvmOpt,
    ModulePass,
    PassContext,
    PassError,
    parse_ir,
    run_pipeline,
)

MODULE = """\
target triple = "nvptx64-nvidia-cuda"

define internal void @unused() {
  ret void
}

define ptx_kernel void @k(ptr %x) {
entry:
  %v = load float, ptr %x, align 4
  %w = fadd float %v, 1.0
  store float %w, ptr %x, align 4
  ret void
}
"""

# parses, but does not verify: %y is used before the block that defines it
NOT_DOMINATED = """\
define i32 @f(i32 %x) {
b:
  ret i32 %y
c:
  %y = add i32 %x, 1
  br label %c
}
"""


@dataclass(frozen=True, slots=True)
class Rewrite(ModulePass):
    """Replaces `old` by `new` in the module text (tests only)."""

    name: ClassVar[str] = "rewrite"
    old: str = ""
    new: str = ""

    def run(self, module, ctx):
        return module.text.replace(self.old, self.new)


@dataclass(frozen=True, slots=True)
class Returns(ModulePass):
    name: ClassVar[str] = "returns"
    what: str = "module"

    def run(self, module, ctx):
        if self.what == "broken-ref":
            return llvm.parse_assembly(NOT_DOMINATED)
        if self.what == "nothing":
            return None
        return module.parse()


@dataclass(frozen=True, slots=True)
class NeedsHost(ModulePass):
    name: ClassVar[str] = "needs-host"
    requires: ClassVar[tuple[str, ...]] = ("host_program",)

    def run(self, module, ctx):
        return module.text.replace("1.0", f"{len(ctx.host_program.ops)}.0")


def test_no_passes_returns_the_verified_input():
    r = run_pipeline(MODULE, ())
    assert r.text == MODULE and r.steps == ()


def test_input_that_does_not_parse_names_the_line_and_column():
    bad = MODULE.replace("fadd float %v, 1.0", "fadd float %v")
    with pytest.raises(IRError) as e:
        run_pipeline(bad, [LlvmOpt()], PassContext(source="in.ll"))
    assert str(e.value.loc) == "in.ll:11:3"  # LLVM points at the next token
    assert e.value.message == "the input module does not parse: expected ',' in arithmetic " \
        "operation"
    assert e.value.render().splitlines()[1].strip() == "store float %w, ptr %x, align 4"


def test_input_that_does_not_verify_names_the_instruction_line():
    with pytest.raises(IRError) as e:
        run_pipeline(NOT_DOMINATED, [], PassContext(source="f.ll"))
    assert str(e.value.loc) == "f.ll:5"
    assert "does not verify: Instruction does not dominate all uses!" in e.value.message


def test_text_from_a_pass_is_parsed_and_verified_before_the_next_pass():
    breaks = Rewrite(old="fadd float %v", new="fadd float %u")
    with pytest.raises(IRError) as e:
        run_pipeline(MODULE, [Rewrite(old="1.0", new="2.0"), breaks, LlvmOpt()])
    assert e.value.message.startswith(f"the module after {breaks} does not parse: use of "
                                      "undefined value '%u'")
    assert e.value.loc.line == 10


def test_a_module_ref_from_a_pass_is_verified():
    with pytest.raises(IRError, match=r"after returns\{what=broken-ref\} does not verify"):
        run_pipeline(MODULE, [Returns("broken-ref")])
    with pytest.raises(TypeError, match="returned NoneType"):
        run_pipeline(MODULE, [Returns("nothing")])


def test_the_parsed_input_is_handed_to_the_first_pass_once():
    ref = parse_ir(MODULE, "test module")
    seen = []

    @dataclass(frozen=True, slots=True)
    class Spy(ModulePass):
        name: ClassVar[str] = "spy"

        def run(self, module, ctx):
            first, second = module.parse(), module.parse()
            seen.append((first is ref, second is ref))
            return first

    r = run_pipeline(MODULE, [Spy()], parsed=ref)
    assert seen == [(True, False)]
    assert r.text == str(ref)


def test_steps_record_each_pass_and_whether_it_changed_the_text():
    r = run_pipeline(MODULE, [Rewrite(old="1.0", new="3.0"), Rewrite(old="nothing here"),
                              LlvmOpt(level=0, rounds=1)], verify_each=True)
    assert [s.pass_text for s in r.steps] == [
        'rewrite{old=1.0,new=3.0}', 'rewrite{old="nothing here",new=""}',
        "llvm-opt{level=0,rounds=1}"]
    assert [s.changed for s in r.steps] == [True, False, True]
    assert "fadd float %v, 3.0" in r.text and "@unused" not in r.text
    assert all(s.seconds >= 0 and s.verify_seconds >= 0 for s in r.steps)


def test_required_facts_are_checked_before_any_pass_runs():
    with pytest.raises(PassError, match="pass needs-host needs the fused host program"):
        run_pipeline(MODULE, [LlvmOpt(), NeedsHost()])
    host = HostProgram(entry="main", buffers=(), ops=())
    r = run_pipeline(MODULE, [NeedsHost()], PassContext(host_program=host))
    assert "fadd float %v, 0.0" in r.text


def test_print_after_writes_the_module_after_the_named_passes():
    out = io.StringIO()
    run_pipeline(MODULE, [Rewrite(old="1.0", new="4.0"), LlvmOpt()], print_after=["llvm-opt"],
                 dump=out)
    (header, *body) = out.getvalue().splitlines()
    assert header.startswith("; *** IR Dump After llvm-opt{level=3,rounds=2} (")
    assert "@unused" not in out.getvalue() and any("4.0" in line or "4.000000e+00" in line
                                                    for line in body)
    out = io.StringIO()
    run_pipeline(MODULE, [Rewrite(old="1.0", new="4.0"), LlvmOpt()], print_after=["all"],
                 dump=out)
    assert out.getvalue().count("; *** IR Dump After") == 2
    with pytest.raises(PassError, match="the pipeline has no pass licm; it has rewrite, llvm-opt"):
        run_pipeline(MODULE, [Rewrite(), LlvmOpt()], print_after=["licm"])


def test_llvm_opt_refuses_a_module_for_another_target():
    with pytest.raises(PassError, match="x.ll targets x86_64-pc-linux-gnu; this pass runs"):
        run_pipeline(MODULE.replace("nvptx64-nvidia-cuda", "x86_64-pc-linux-gnu"), [LlvmOpt()],
                     PassContext(source="x.ll"))
