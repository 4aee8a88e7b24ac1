"""A fork server for the tests' `sirius` commands (`tests/helpers.run_cli`).

Starting `python -m sirius.cli` costs about a second of imports (numpy, networkx, islpy,
llvmlite and sirius's own 170 modules) before the command does anything; the suite runs the
command some 130 times, so that was two minutes of its CPU time on the 2-core CI machine. This
process imports every sirius module once, then forks one child per command. A child is a
process of its own, as `python -m sirius.cli` would be: its own environment, working directory,
standard streams (files the caller reads), exit status (a signal's: negative) and `atexit`
handlers; no state passes from one command to the next (each is forked from the server, which
never runs a command itself, so its caches stay empty). Only the imports are shared.

Protocol: one JSON request per line on stdin, `{"args", "cwd", "env", "out", "err"}`; one JSON
reply per line on stdout, `{"returncode"}`. The server ends at end of input (its test worker
ended). `SIRIUS_TEST_FRESH_CLI=1` makes `run_cli` start real interpreters instead.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import pkgutil
import sys
import traceback
from pathlib import Path

MAIN = str(Path(__file__).resolve().parent.parent / "sirius" / "cli" / "__main__.py")


def preload() -> None:
    import sirius

    for m in pkgutil.walk_packages(sirius.__path__, "sirius."):
        if m.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(m.name)
        except ImportError:  # an optional extra (tvm, pycuda): the command imports it itself
            pass


def _exit_code(e: SystemExit) -> int:
    """What the interpreter does with an uncaught SystemExit."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def child(req: dict) -> None:
    """Run one command in this (forked) process and end it; never returns."""
    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        # `python -m sirius.cli`: argv[0] is the module's file, the working directory first on
        # the path
        sys.argv = [MAIN, *req["args"]]
        sys.path[0] = os.getcwd()
        from sirius.cli import main

        try:
            code = _exit_code(SystemExit(main()))
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException:  # noqa: BLE001 (printed as the interpreter prints it)
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    preload()
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(req)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        sys.stdout.write(json.dumps({"returncode": rc}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
