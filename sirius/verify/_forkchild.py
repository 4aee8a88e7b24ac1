"""Imported by the fork server of verify's worker pool (`Runner`, `set_forkserver_preload`),
so that every worker it forks has it.

A worker is forked first and told its work second. When Ctrl-C ends sirius between the two
(the pool starts its workers as runs are submitted), the new worker finds its parent's pipe
closed (reading its start-up data raises `EOFError`) or the pool's semaphores already unlinked
(`FileNotFoundError` rebuilding one), and the fork server prints that traceback to the terminal
after sirius has already said "interrupted". Such a worker has nothing to do and nobody to
tell; it exits quietly (status 1). Any other error is printed as before.

The fork server also ends with sirius, and every process it forks ends with the server, from
the fork on (`die_with_parent`): sirius killed from outside left them running for good.
"""

from __future__ import annotations

import os
import sys

_default_hook = sys.excepthook
_SIRIUS = os.getppid()  # the fork server is started by the sirius process


def _sirius_gone() -> bool:
    try:
        with open(f"/proc/{_SIRIUS}/stat") as f:  # a zombie has ended too
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _pool_released(tb) -> bool:
    """Whether the error came from rebuilding one of the pool's semaphores (its last frame in
    multiprocessing's synchronize.py): their owner unlinks them only when the pool is shut
    down, i.e. sirius is ending (and may be waiting for this very worker to end)."""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith(
        "multiprocessing/synchronize.py")


def _orphan_quiet(tp, value, tb) -> None:
    if issubclass(tp, EOFError) or (issubclass(tp, OSError)
                                    and (_pool_released(tb) or _sirius_gone())):
        return
    _default_hook(tp, value, tb)


sys.excepthook = _orphan_quiet

# The fork server itself (run as `python -c "from multiprocessing.forkserver import main; ..."`)
# ends with sirius, and every process it forks ends with it, from the fork on: killed from
# outside (SIGTERM, SIGKILL), sirius left them running for good, a worker keeping the server
# alive (docs/verify.md).
def _in_fork_server() -> bool:
    """Whether this import is the fork server's preload (multiprocessing.forkserver.main is
    running it), not an import anywhere else (a test's)."""
    server = sys.modules.get("multiprocessing.forkserver")
    frame = sys._getframe()
    while server is not None and frame is not None:
        if frame.f_code is server.main.__code__:
            return True
        frame = frame.f_back
    return False


if _in_fork_server():
    from sirius.procs import die_with_parent

    def _with_server(server: int = os.getpid()) -> None:
        die_with_parent()
        if os.getppid() != server:  # it ended before that
            os._exit(1)

    die_with_parent()
    if os.getppid() != _SIRIUS:
        os._exit(1)
    os.register_at_fork(after_in_child=_with_server)
