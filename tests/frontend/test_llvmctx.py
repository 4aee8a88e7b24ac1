"""sirius/frontend/llvmctx.py: a context per parsed module, disposed after its last module."""

from __future__ import annotations

import gc

import pytest

from sirius.frontend import llvmctx

IR = """
%struct.pair = type { i32, float }
@g = global %struct.pair zeroinitializer
define i32 @f(i32 %x) {
  %y = add i32 %x, 1
  ret i32 %y
}
"""
OTHER = """
declare i32 @f(i32)
define i32 @h(i32 %x) {
  %y = call i32 @f(i32 %x)
  ret i32 %y
}
"""


class _Cycle:
    def __init__(self, mod):
        self.mod = mod
        self.me = self


def test_modules_in_reference_cycles_are_freed_in_any_order():
    # Python may finalize a module and its context in either order within a cycle; the context
    # must outlive the module's disposal (it segfaulted when the context was a plain ContextRef)
    for _ in range(200):
        mod = llvmctx.parse(IR)
        ctx = llvmctx.context_of(mod)
        c = _Cycle(mod)
        c.ctx = ctx
        c.fn = mod.get_function("f")
        c.ty = c.fn.type
        del mod, ctx, c
    gc.collect()


def test_the_context_is_disposed_with_its_last_module():
    mod = llvmctx.parse(IR)
    ctx = llvmctx.context_of(mod)
    assert ctx.users == 1
    del mod
    gc.collect()
    assert ctx.closed and ctx.users == 0


def test_linked_modules_share_a_context_and_the_destination_disposes_it():
    with llvmctx.shared_context() as ctx:
        a, b = llvmctx.parse(IR, ctx), llvmctx.parse(OTHER, ctx)
        assert ctx.users == 3  # the two modules and the `with`
        a.link_in(b)  # b is given to a: no longer a user
        assert ctx.users == 2
    assert ctx.users == 1 and not ctx.closed
    assert {f.name for f in a.functions} == {"f", "h"}
    del a, b
    gc.collect()
    assert ctx.closed


def test_a_shared_context_outlives_a_module_dropped_inside_the_with():
    # compile_program parses a device module, then the host one fails: the device module is
    # dropped, and the retry parses into the same context, which must still be there
    with llvmctx.shared_context() as ctx:
        dropped = llvmctx.parse(IR, ctx)
        del dropped
        gc.collect()
        assert not ctx.closed
        kept = llvmctx.parse(IR, ctx)
    assert kept.get_function("f") and not ctx.closed
    del kept
    gc.collect()
    assert ctx.closed
    with pytest.raises(ValueError, match="disposed"):
        llvmctx.parse(IR, ctx)


def test_a_module_parsed_into_anothers_context_links_into_it():
    a = llvmctx.parse(IR)
    b = llvmctx.parse(OTHER, llvmctx.context_of(a))
    a.link_in(b)
    assert "call i32 @f" in str(a)


def test_text_that_does_not_parse_raises_as_llvmlite_does():
    with pytest.raises(RuntimeError, match="parsing error"):
        llvmctx.parse("define i32 @f( {")
    with llvmctx.shared_context() as ctx:
        with pytest.raises(RuntimeError):  # a context given stays usable after a failure
            llvmctx.parse("garbage", ctx)
        keep = llvmctx.parse(IR, ctx)
        with pytest.raises(RuntimeError):
            llvmctx.parse("garbage", ctx)
        assert ctx.users == 2 and keep.get_function("f")


def test_only_its_own_contexts_are_accepted():
    import llvmlite.binding as llvm

    with pytest.raises(TypeError, match="shared_context"):
        llvmctx.parse(IR, llvm.get_global_context())
