"""Arguments every command shares, and the clang flags they make."""

from __future__ import annotations

import argparse
import re


def program_args(sp: argparse.ArgumentParser) -> None:
    """PROGRAM.cu files, --arch, --entry, -I, -D, -Xclang/--clang-flag, --no-cache."""
    sp.add_argument("files", nargs="+", metavar="PROGRAM.cu")
    sp.add_argument("--arch", default="sm_80", type=arch, help="GPU architecture (default sm_80)")
    sp.add_argument("--entry", default="main", help="host entry function (default main)")
    sp.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                    help="add an include directory")
    sp.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                    help="define a macro")
    sp.add_argument("-Xclang", "--clang-flag", dest="clang_flags", action="append", default=[],
                    metavar="ARG", help="pass ARG to clang (repeatable)")
    sp.add_argument("--no-cache", action="store_true", help="recompile, ignore the IR cache")


def clang_flags(args: argparse.Namespace) -> list[str]:
    return ([f"-I{d}" for d in args.include] + [f"-D{d}" for d in args.define]
            + list(args.clang_flags))


def arch(text: str) -> str:
    """An --arch value: sm_XY (sm_90a and sm_100f forms too)."""
    if not re.fullmatch(r"sm_\d{2,3}[af]?", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU architecture (e.g. sm_80, sm_90)")
    return text
