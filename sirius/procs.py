"""Child processes that end with the sirius process that started them."""

from __future__ import annotations

import ctypes
import signal
import sys


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Linux: this process gets `sig` when the thread that started it ends, so that a sirius
    ended from outside (SIGTERM from `timeout` or a CI runner, SIGKILL) leaves no worker
    behind: a pool worker holds both ends of its own task queue, so it never sees the queue
    close, and it keeps the fork server that made it alive. Elsewhere, nothing."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
