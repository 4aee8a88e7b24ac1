"""A fork server for the tests' `sirius` commands (`tests/helpers.run_cli`, and `%sirius` in
the lit tests through tests/cliclient.py).

Starting `python -m sirius.cli` costs about a second of imports (numpy, networkx, islpy,
llvmlite and sirius's own 170 modules) before the command does anything; the suite runs the
command some 160 times, so that was minutes of its CPU time on the 2-core CI machine. This
process imports every sirius module once, then forks one child per command. A child is a
process of its own, as `python -m sirius.cli` would be: the caller's environment, working
directory and standard streams (passed over the socket as file descriptors), its own exit
status (a signal's: negative) and `atexit` handlers; no state passes from one command to the
next (each is forked from the server, which never runs a command itself, so its caches stay
empty). Only the imports are shared.

    python tests/clizygote.py SOCKET     (prints "ready" once it listens)

Protocol, one connection per command: the client sends one JSON object `{"args", "cwd",
"env"}` with its stdin, stdout and stderr descriptors attached (SCM_RIGHTS), and reads one
JSON object `{"returncode"}` back. The server ends with the process that started it.
`SIRIUS_TEST_FRESH_CLI=1` makes the tests start real interpreters instead.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import pkgutil
import signal
import socket
import sys
import traceback
from pathlib import Path

MAIN = str(Path(__file__).resolve().parent.parent / "sirius" / "cli" / "__main__.py")
MAX_REQUEST = 1 << 22  # the request's JSON (the environment is the bulk)


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


def _command(req: dict, fds: list[int]) -> None:
    """Run one command in this (forked) process and end it; never returns."""
    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
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


def _handle(conn: socket.socket) -> None:
    """One connection, in a process forked for it: the command in a child of its own, whose
    status goes back to the client. Never returns."""
    rc = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it; children wait
        data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
        while chunk := conn.recv(1 << 16):  # the rest of a long request, up to the client's EOF
            data += chunk
        req = json.loads(data)
        if len(fds) != 3:
            raise ValueError(f"3 file descriptors expected, {len(fds)} received")
        pid = os.fork()
        if pid == 0:
            conn.close()
            _command(req, fds)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
        rc = 0
    finally:
        os._exit(rc)


def serve(path: str) -> None:
    from sirius.procs import die_with_parent

    die_with_parent()
    preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the connections' processes reap themselves
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            server.close()
            _handle(conn)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
