"""Long launches on the CPU executor: a warning before, progress during, Ctrl-C at any time.

A launch of many threads (`MONITORED_THREADS` or more) runs in a background thread while the
calling thread shows its progress on stderr: a rich progress bar when stderr is a terminal, else
one plain line every `interval` seconds. Ctrl-C stops any launch between two blocks (the C
runtime's SIGINT handler sets its `cancel` flag) and raises KeyboardInterrupt; a second Ctrl-C
during the same launch ends the process with status 130 (for a block that never finishes).

Before a launch whose estimated time is over `WARN_SECONDS`, a `long-launch` warning says how
long it will take at least. The estimate is a lower bound: per worker, every block costs
`BLOCK_NS` and every thread `THREAD_NS` (`FIBER_THREAD_NS` on the fiber path), a little under
the executor's speed on an empty kernel (measured: 17 ns a block, 8 ns a thread, 160 ns a
fiber thread with one barrier, on one core of the x86-64 machine of BENCHMARKS.md); real
kernels do work in each thread and take longer.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable

MONITORED_THREADS = 1 << 22
WARN_SECONDS = 30.0
BLOCK_NS = 15.0
THREAD_NS = 5.0
FIBER_THREAD_NS = 60.0


def estimate_seconds(nblocks: int, nthreads: int, workers: int, fibers: bool) -> float:
    """A lower bound on the wall time of a launch (see the module docstring)."""
    per_thread = FIBER_THREAD_NS if fibers else THREAD_NS
    return nblocks * (BLOCK_NS + nthreads * per_thread) / max(1, workers) * 1e-9


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    if seconds < 2 * 365 * 86400:
        return f"{seconds / 86400:.0f} days"
    return f"{seconds / (365 * 86400):.3g} years"


class Progress:
    """Progress of one launch on a stream: rich on a terminal, else plain lines."""

    def __init__(self, kernel: str, total: int, stream=None, interval: float = 10.0,
                 delay: float = 1.0):
        self.kernel = kernel
        self.total = total
        self.stream = stream or sys.stderr
        self.interval = interval
        self.delay = delay  # nothing is shown for a launch that ends sooner
        self.start = time.perf_counter()
        self.last = self.start
        self.bar = None
        self.task = None
        self.rich = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, done: int) -> None:
        now = time.perf_counter()
        if now - self.start < self.delay:
            return
        if self.rich:
            if self.bar is None:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                    TimeRemainingColumn,
                )

                self.bar = Progress(TextColumn(f"kernel {self.kernel}"), BarColumn(),
                                    MofNCompleteColumn(), TextColumn("blocks"),
                                    TimeElapsedColumn(), TimeRemainingColumn(),
                                    console=Console(file=self.stream), transient=True)
                self.bar.start()
                self.task = self.bar.add_task("", total=self.total)
            self.bar.update(self.task, completed=done)
        elif now - self.last >= self.interval:
            self.last = now
            self.stream.write(self.line(done, now - self.start) + "\n")
            self.stream.flush()

    def line(self, done: int, elapsed: float) -> str:
        pct = 100.0 * done / self.total if self.total else 100.0
        left = f", about {duration(elapsed * (self.total - done) / done)} left" if done else ""
        return (f"sirius: kernel {self.kernel}: {done:,} of {self.total:,} blocks ({pct:.1f}%), "
                f"{duration(elapsed)}{left}")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def run_monitored(launch: Callable[[], int], desc, nworkers: int,
                  progress: Progress | None) -> int:
    """Run `launch()` (the blocking C call on `desc`) in a background thread and report the
    blocks its workers finished until it returns. KeyboardInterrupt stops it between blocks,
    waits for it to return, and propagates."""
    result: list[int] = []
    finished = threading.Event()

    def target() -> None:
        try:
            result.append(launch())
        finally:
            finished.set()

    done = ctypes.cast(desc.done, ctypes.POINTER(ctypes.c_uint64))
    t = threading.Thread(target=target, name="sirius-launch", daemon=True)
    t.start()
    try:
        while not finished.wait(0.1):
            if progress is not None:
                progress.update(sum(done[8 * i] for i in range(nworkers)))
    except KeyboardInterrupt:
        desc.cancel = 1
        finished.wait()
        raise
    finally:
        if progress is not None:
            progress.stop()
    t.join()
    return result[0]
