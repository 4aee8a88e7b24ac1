"""`sirius ARGS` through the tests' fork server (tests/clizygote.py), whose socket is
$SIRIUS_TEST_ZYGOTE: the lit tests' `%sirius` (tests/lit/lit.cfg.py). This process imports
nothing of sirius; it hands its standard streams, working directory and environment to a
process forked from the server and exits with that process's status. Without the variable it
runs `python -m sirius.cli ARGS` itself."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def request(path: str, args: list[str], cwd: str, env: dict[str, str],
            fds: tuple[int, int, int]) -> int:
    """Run `sirius ARGS` in a process forked by the server at `path`, with `fds` as its stdin,
    stdout and stderr; its return code (a signal's: negative, as subprocess gives it)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        data = json.dumps({"args": args, "cwd": cwd, "env": env}).encode()
        socket.send_fds(s, [data], list(fds))
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    if not reply:
        raise RuntimeError(f"the sirius fork server at {path} (tests/clizygote.py) ended")
    return int(json.loads(reply)["returncode"])


def main() -> None:
    path = os.environ.get("SIRIUS_TEST_ZYGOTE")
    if not path:
        os.execv(sys.executable, [sys.executable, "-m", "sirius.cli", *sys.argv[1:]])
    rc = request(path, sys.argv[1:], os.getcwd(), dict(os.environ), (0, 1, 2))
    if rc < 0:  # ended by a signal: this process ends the same way
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    sys.exit(rc)


if __name__ == "__main__":
    main()
