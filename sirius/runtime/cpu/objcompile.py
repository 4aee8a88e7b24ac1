"""LLVM's optimization and code generation of one executor module into a host object file.

`jit.py` calls `compile_text` for a whole module, or for each part of a module cut by `split.py`:
one part in its own process, the others each in a process of this module run as a program,
    python -m sirius.runtime.cpu.objcompile SPEED IN.ll OUT.o
(llvmlite holds one lock around every LLVM call, so threads would compile one at a time).
This module imports nothing of sirius but the context helper, so such a process starts in a
fraction of a second.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import llvmlite.binding as llvm

from sirius.frontend import llvmctx
from sirius.procs import die_with_parent


class VerifyError(Exception):
    """The module does not verify (a bug in the rewrite or the split)."""


def machine(opt: int = 2):
    """A target machine for this host, with the code model MCJIT needs."""
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), opt=opt,
                                        codemodel="jitdefault")


@functools.cache
def _machines():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return {0: machine(opt=0), 2: machine(opt=2)}


def compile_text(text: str, speed: int) -> bytes:
    """The object file of the module `text`: LLVM's O`speed` pipeline, then code generation
    (at speed 0 LLVM's O0 pipeline, which only inlines `alwaysinline` functions, and fast
    instruction selection)."""
    return compile_module(parse_verified(text), speed)


def parse_verified(text: str) -> llvm.ModuleRef:
    """The module `text`, parsed and verified (VerifyError otherwise)."""
    try:
        mod = llvmctx.parse(text)
        mod.verify()
    except RuntimeError as e:
        raise VerifyError(str(e)) from e
    return mod


def compile_module(mod: llvm.ModuleRef, speed: int) -> bytes:
    """The object file of the parsed module `mod` (changed in place), as `compile_text`."""
    tm = _machines()[0 if speed == 0 else 2]
    pto = llvm.create_pipeline_tuning_options(speed_level=speed)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)


def main(argv: list[str]) -> int:
    die_with_parent()  # a sirius verify that ends a module's build early leaves no part
    speed, src, dst = int(argv[0]), Path(argv[1]), Path(argv[2])
    try:
        obj = compile_text(src.read_text(), speed)
    except VerifyError as e:
        print(f"the module part {src} does not verify: {e}", file=sys.stderr)
        return 3
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.write_bytes(obj)
    tmp.replace(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
