"""The `sirius` command. One module per subcommand, each with `register(sub)` adding its parser
with `set_defaults(func=...)`; `common.py` holds the arguments every command shares. The CLI
calls the library (`sirius.pipeline`, the stage packages); nothing in the library imports it."""

from __future__ import annotations

import os
import sys

# numpy's OpenBLAS starts a thread per core at import, and each spins for a while before it
# sleeps: 0.1 s of CPU for every sirius process (and every worker it starts), for BLAS calls
# that sirius does not make. The command's own processes take one thread; a user's setting
# stays, and the library (`import sirius`) changes nothing.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _interrupted(exit_now: bool = True) -> int:
    """Ctrl-C: one line, status 130, no traceback. CPython records a KeyboardInterrupt raised
    inside exec() of a string (dataclasses and namedtuples build their methods that way, so
    any import can be in one) as unhandled, and then ends the process with SIGINT even though
    it was handled here; so the command leaves with os._exit after the exit handlers."""
    print("sirius: interrupted", file=sys.stderr)
    if not exit_now:
        return 130
    import atexit

    getattr(atexit, "_run_exitfuncs", lambda: None)()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(130)


try:  # Ctrl-C while Python loads the command (the console script imports this module first)
    import argparse
    import contextlib
    import importlib
    import traceback
    from pathlib import Path

    from sirius._version import __version__
    from sirius.diagnostics import SiriusError
except KeyboardInterrupt:
    _interrupted()

COMMANDS = ("inspect", "compile", "analyze", "run", "import_tvm", "fuse", "verify", "tune", "opt",
            "bench")


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
        if getattr(args, "report_file", None):
            return _to_file(args)
        return args.func(args)
    except SiriusError as e:
        print(e.render(), file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a command that stopped reading (head)
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:  # the command (argv None) exits at once; a caller gets 130
        return _interrupted(exit_now=argv is None)
    except Exception as e:  # a bug in sirius, not in the user's program
        if os.environ.get("SIRIUS_DEBUG"):
            traceback.print_exc()
        print(f"sirius: internal error: {type(e).__name__}: {e}\n"
              "this is a bug in sirius; rerun with SIRIUS_DEBUG=1 for a traceback and report it",
              file=sys.stderr)
        return 70


def _to_file(args: argparse.Namespace) -> int:
    """Run a command with its stdout (the report or JSON) going to `-o FILE`."""
    path = Path(args.report_file)
    if path.is_dir():
        raise SiriusError(f"-o {path}: is a directory; give a file name")
    try:
        out = path.open("w")
    except OSError as e:
        raise SiriusError(f"-o {path}: cannot write it: {e.strerror}") from e
    with out, contextlib.redirect_stdout(out):
        return args.func(args)
