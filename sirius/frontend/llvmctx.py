"""Parsing LLVM IR, each module into an LLVM context of its own.

LLVM's global context (llvmlite's default) keeps every type, constant and metadata node of every
module ever parsed into it, for the life of the process, and parsing slows as it grows.
Measured on the 2-core VM (the device and host modules of 40 random programs, parsed 20 times
over in one process): a round took 1.1 s at first and 4.2 s at the end (one 8.3 s) in the
global context, 0.55-0.84 s throughout with a context per module. In the test suite's
long-lived workers that made small tests take 30-45 s.

Who disposes a context: llvmlite gives each module a reference to its context, and disposes
each when Python frees it. In a reference cycle Python may free the context first, and the
module's disposal then reads freed memory (a segfault, seen). So here the context is never
disposed by itself: each module parsed by `parse` counts as a user of its context, stops being
one when it is disposed or given to another module (linked in), and the last one disposes the
context after itself. A context with no module left would hold about 140 KB (measured), so
none is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import llvmlite.binding as llvm
from llvmlite.binding import ffi
from llvmlite.binding.context import ContextRef


class _Context(ContextRef):
    """A context disposed by its last module (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(ffi.lib.LLVMPY_ContextCreate())
        self.users = 0

    def close(self) -> None:  # never by itself (Python's finalizer calls this)
        pass

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.free()

    def free(self) -> None:
        ffi.lib.LLVMPY_ContextDispose(self)
        self.detach()


class _Module(llvm.ModuleRef):
    """A module that releases its `_Context` once, when disposed or detached (linked in)."""

    _released = False

    def _dispose(self) -> None:
        super()._dispose()
        self._release()

    def detach(self) -> None:
        closed = self._closed
        super().detach()
        if not closed:
            self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._context.release()


@contextmanager
def shared_context() -> Iterator[llvm.ContextRef]:
    """A context for `parse` to share between modules that are linked together. It lives at
    least until the `with` ends, even when every module parsed into it so far is gone (a
    module dropped after a failed parse must not take the context of the next one); then
    with its last module."""
    ctx = _Context()
    ctx.users += 1
    try:
        yield ctx
    finally:
        ctx.release()


def parse(text: str, context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    """`text` parsed into `context` (from `shared_context` or `context_of`), or into a new context
    of its own; RuntimeError as llvmlite's for text that does not parse."""
    return _parse(llvm.parse_assembly, text, context)


def parse_bitcode(data: bytes, context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    return _parse(llvm.parse_bitcode, data, context)


def _parse(how, data, context: llvm.ContextRef | None) -> llvm.ModuleRef:
    ctx = _usable(context)
    try:
        return _adopt(how(data, ctx))
    except RuntimeError:
        _discard(ctx, context)
        raise


def context_of(module: llvm.ModuleRef) -> llvm.ContextRef:
    """The context `module` was parsed into (to parse a module to link into it)."""
    return module._context


def _usable(context: llvm.ContextRef | None) -> _Context:
    if context is None:
        return _Context()
    if not isinstance(context, _Context):
        raise TypeError("llvmctx.parse: a context from llvmctx.shared_context or context_of")
    if context.closed:
        raise ValueError("llvmctx.parse: that context was disposed with its last module")
    return context


def _discard(ctx: _Context, given: llvm.ContextRef | None) -> None:
    """After a failed parse: the context made for it goes (one the caller gave stays theirs)."""
    if given is None:
        ctx.free()


def _adopt(mod: llvm.ModuleRef) -> llvm.ModuleRef:
    mod.__class__ = _Module
    mod._context.users += 1
    return mod
