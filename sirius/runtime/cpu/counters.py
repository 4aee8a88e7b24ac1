"""How the CPU executor runs a `counters` megakernel (docs/fusion-megakernel.md): its blocks as
fibers. A block runs its segments in order; before a segment it runs the megakernel's own wait
helper, after it the signal helper, both as the module holds them (helperexec.py), on the
megakernel's flags and wait tables. A wait that spins yields: the block is set aside until a
signal stores to a word its spin reads, and then resumes where it stopped. So a block goes on
exactly when the device's code lets it, and a wrong table entry, index, target or flag in the
helpers changes what runs.

The block order picks among the blocks that may run a segment: the latest segment first, so
every block runs ahead as far as its waits let it (a consumer whose wait is missing then runs
before its producer), and among those the lowest block (`forward`) or the highest (`reverse`),
so a wait that leaves out producers at either end of a range is caught; `random` picks any.
A state where every block that has not finished waits is a deadlock, reported with the blocks
and what they wait for, never a hang.

The helpers touch only the flags and tables (the executor refuses a megakernel whose segments
reach them: entries.py), and the segments never read those, so the segments of consecutive
picks of one segment run as one launch over those blocks, after their signals: the data sees
the same order of segment runs as if each ran at its pick."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass

from sirius.runtime.cpu.helperexec import Code, Env, Fault, Fiber, Memory, Pointer, check_idle

# an argument of a helper call in the megakernel's body: ("g", global) or ("c", integer)
CallArg = tuple[str, object]


@dataclass(frozen=True, slots=True)
class CounterProgram:
    """What a `counters` megakernel's body does around its segments: the arguments of the wait
    before each segment (None: no wait) and of the signal after it, the two helpers compiled,
    and the globals they reach (name, initial bytes, writable)."""
    waits: tuple[tuple[CallArg, ...] | None, ...]
    signals: tuple[tuple[CallArg, ...], ...]
    wait_code: Code | None
    signal_code: Code
    memory: tuple[tuple[str, bytes, bool], ...]

    def fresh_memory(self) -> dict[str, tuple[bytearray, bool]]:
        return {name: (bytearray(data), writable) for name, data, writable in self.memory}


class Deadlock(Exception):
    """Every block that has not finished waits."""


def _args(refs: tuple[CallArg, ...]) -> tuple:
    return tuple((x, 0) if kind == "g" else x for kind, x in refs)


def run(prog: CounterProgram, trips: int, nblocks: int, block: tuple[int, int, int],
        order: int, seed: int, memory: Memory,
        launch: Callable[[int, list[int]], None]) -> int:
    """Run the megakernel's `trips` x segments over `nblocks` blocks; `launch(s, blocks)` runs
    step s (segment s mod K of iteration s div K) for those blocks. `order`: 0 forward,
    1 reverse, 2 random (native.ORDERS). Returns the flag checks of the waits (atomic loads
    outside the spins that went round again)."""
    nseg = len(prog.signals)
    total = nseg * trips
    grid = (nblocks, 1, 1)

    def env(b: int, tid=(0, 0, 0)) -> Env:
        return Env(tid, (b, 0, 0), block, grid)

    last = (block[0] - 1, block[1] - 1, block[2] - 1)
    if last != (0, 0, 0):  # the other threads: only the barrier, no memory work
        first = next((w for w in prog.waits if w is not None), None)
        if first is not None and prog.wait_code is not None:
            check_idle(prog.wait_code, _args(first), env(0, last), memory)
        check_idle(prog.signal_code, _args(prog.signals[0]), env(0, last), memory)

    step = [0] * nblocks
    fibers: dict[int, Fiber] = {}
    waiting: dict[Pointer, set[int]] = {}
    rng = random.Random(seed)
    ready: list = []  # a heap (forward, reverse) or a list (random)
    checks = 0

    def push(b: int) -> None:
        s = step[b]
        if order == 2:
            ready.append((s, b))
        else:
            heapq.heappush(ready, (-s, b) if order == 0 else (-s, -b))

    def poll(b: int) -> None:
        nonlocal checks
        f = fibers[b]
        if f.resume():
            del fibers[b]
            checks += f.flag_checks
            push(b)
        else:
            for p in f.blocked:
                waiting.setdefault(p, set()).add(b)

    def arrive(b: int) -> None:
        if step[b] == total:
            return
        refs = prog.waits[step[b] % nseg]
        if refs is None or prog.wait_code is None:
            push(b)
            return
        fibers[b] = Fiber(prog.wait_code, _args(refs), env(b), memory)
        poll(b)

    for b in range(nblocks):
        arrive(b)
    pending: tuple[int, list[int]] | None = None
    while ready:
        if order == 2:
            i = rng.randrange(len(ready))
            ready[i], ready[-1] = ready[-1], ready[i]
            s, b = ready.pop()
        else:
            s, b = heapq.heappop(ready)
            s, b = -s, (b if order == 0 else -b)
        if pending is not None and pending[0] != s:
            launch(*pending)
            pending = None
        if pending is None:
            pending = (s, [])
        pending[1].append(b)
        signal = Fiber(prog.signal_code, _args(prog.signals[s % nseg]), env(b), memory)
        if not signal.resume():
            raise Fault(f"{prog.signal_code.name} of block {b} after segment {s % nseg} "
                        "spins: a signal must not wait")
        step[b] += 1
        woken: set[int] = set()
        for p in signal.stored:
            woken |= waiting.pop(p, set())
        arrive(b)
        for w in sorted(woken):
            if w in fibers:
                poll(w)
    if pending is not None:
        launch(*pending)
    if any(s < total for s in step):
        raise Deadlock(_deadlock(prog, fibers, step, nseg, trips, nblocks))
    return checks


def _deadlock(prog: CounterProgram, fibers: dict[int, Fiber], step: list[int], nseg: int,
              trips: int, nblocks: int) -> str:
    flags = prog.signals[0][0][1] if prog.signals and prog.signals[0] else None

    def what(p: Pointer) -> str:
        name, off = p
        if name == flags:
            j, q = divmod(off // 4, nblocks)
            return f"block {q} of segment {j}"
        return f"word {off // 4} of @{name}"

    stuck = sorted(fibers)
    shown = "; ".join(
        f"block {b} before segment {step[b] % nseg}"
        + (f" of iteration {step[b] // nseg}" if trips > 1 else "")
        + f" waits for {' or '.join(sorted(what(p) for p in fibers[b].blocked))}"
        for b in stuck[:6])
    more = f" (and {len(stuck) - 6} more)" if len(stuck) > 6 else ""
    return f"deadlock: {len(stuck)} block(s) wait for work that can never finish: {shown}{more}"
