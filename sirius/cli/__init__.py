"""The `sirius` command. One module per subcommand, each with `register(sub)` adding its parser
with `set_defaults(func=...)`; `common.py` holds the arguments every command shares. The CLI
calls the library (`sirius.pipeline`, the stage packages); nothing in the library imports it."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from sirius._version import __version__
from sirius.diagnostics import SiriusError

COMMANDS = ("inspect", "compile", "analyze", "run", "import_tvm", "fuse", "verify")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sirius", description="Whole-program CUDA kernel fusion.")
    p.add_argument("--version", action="version", version=f"sirius {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"sirius.cli.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return args.func(args)
    except SiriusError as e:
        print(e.render(), file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a command that stopped reading (head)
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("sirius: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in sirius, not in the user's program
        if os.environ.get("SIRIUS_DEBUG"):
            traceback.print_exc()
        print(f"sirius: internal error: {type(e).__name__}: {e}\n"
              "this is a bug in sirius; rerun with SIRIUS_DEBUG=1 for a traceback and report it",
              file=sys.stderr)
        return 70
