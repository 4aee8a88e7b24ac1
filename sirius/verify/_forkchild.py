"""Imported by the fork server of verify's worker pool (`Runner`, `set_forkserver_preload`),
so that every worker it forks has it.

A worker is forked first and told its work second. When Ctrl-C ends sirius between the two
(the pool starts its workers as runs are submitted), the new worker finds its parent's pipe
closed: reading its start-up data raises `EOFError`, and the fork server prints that traceback
to the terminal after sirius has already said "interrupted". Such a worker has nothing to do
and nobody to tell; it exits quietly (status 1). Any other error is printed as before.
"""

from __future__ import annotations

import sys

_default_hook = sys.excepthook


def _orphan_quiet(tp, value, tb) -> None:
    if issubclass(tp, EOFError):  # the parent vanished before sending the worker its start
        return
    _default_hook(tp, value, tb)


sys.excepthook = _orphan_quiet
