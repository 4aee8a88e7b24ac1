"""`sirius compile PROGRAM.cu`: compile to LLVM IR through the IR cache and time it."""

from __future__ import annotations

import argparse
from pathlib import Path

from sirius.cli.common import clang_flags, program_args
from sirius.frontend import compile_program


def _cmd_compile_stats(args: argparse.Namespace) -> int:
    program = compile_program([Path(f) for f in args.files], arch=args.arch,
                              extra_flags=clang_flags(args), use_cache=not args.no_cache)
    print(f"cache {'hit' if program.cache_hit else 'miss'}: {program.compile_seconds:.3f} s")
    return 0




def register(sub) -> None:
    cc = sub.add_parser("compile", help="compile to LLVM IR (through the cache) and time it")
    program_args(cc)
    cc.set_defaults(func=_cmd_compile_stats)
