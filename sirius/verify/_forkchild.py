"""Imported by the fork server of verify's worker pool (`Runner`, `set_forkserver_preload`),
so that every worker it forks has it.

A worker is forked first and told its work second. When Ctrl-C ends sirius between the two
(the pool starts its workers as runs are submitted), the new worker finds its parent's pipe
closed (reading its start-up data raises `EOFError`) or the pool's semaphores already unlinked
(`FileNotFoundError` rebuilding one), and the fork server prints that traceback to the terminal
after sirius has already said "interrupted". Such a worker has nothing to do and nobody to
tell; it exits quietly (status 1). Any other error, and any error while sirius still runs, is
printed as before.
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


def _orphan_quiet(tp, value, tb) -> None:
    if issubclass(tp, EOFError) or (issubclass(tp, OSError) and _sirius_gone()):
        return
    _default_hook(tp, value, tb)


sys.excepthook = _orphan_quiet
