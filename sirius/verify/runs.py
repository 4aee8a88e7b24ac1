"""The program runs of differential verification, in parallel over the cores.

```python
with Runner(ctx, jobs=None, tick=print) as runner:   # None: one worker per core
    runner.submit(RunSpec("fused", "reverse", check_bounds=True))
    for spec, out in runner.results():                # as they finish
        ...
    runner.cancel()                                   # --fail-fast: stop the rest
```

Each run is one `run_host_program` on a fresh `CpuDevice`; runs are independent, so they go to
a process pool (`concurrent.futures.ProcessPoolExecutor`). The workers are started by a fork
server (or spawned), not forked from the caller: the caller may hold a JIT (llvmlite's MCJIT
with its executable memory) and threads (a progress spinner), and forking a process with
threads can deadlock the child on a lock another thread held. A worker gets the programs once
(`RunContext`, pickled: host programs, kernel facts and device IR text) and parses and JITs the
device module itself. Progress comes back per launch through a queue. When the pool cannot be
used (no worker starts, a worker dies, a result does not pickle) the runs that are left go on
serially in this process, and `notes` says so.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import queue
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import numpy as np

from sirius.diagnostics import Location, SiriusError
from sirius.procs import die_with_parent
from sirius.verify.replay import Player, Recorder, ReplaySetup

__all__ = ["HeadStart", "LazyProgram", "RunContext", "RunOutput", "RunSpec", "Runner"]


@dataclass(frozen=True)
class RunContext:
    """What every run needs, picklable: (host program, device IR, files) per side, the
    kernels (KernelInfo), the seed and the original's buffer dtypes (which both sides use)."""

    original: tuple  # (HostProgram, device_ir, files)
    fused: tuple
    kernels: dict[str, tuple]  # side -> KernelInfo tuple
    seed: int
    dtypes: dict[str, np.dtype]
    keep: dict[str, frozenset[str]]  # side -> buffers whose final contents come back
    keep_initial: frozenset[str] = frozenset()  # buffers whose initial contents come back
    replay: ReplaySetup | None = None  # the fused runs' launch replay (sirius/verify/replay.py)


@dataclass(frozen=True)
class RunSpec:
    side: str  # "original" or "fused"
    order: str
    check_bounds: bool = False
    # launch replay (sirius/verify/replay.py): "record" (the leader, the fused run in the first
    # order), "play" (a fused run in a later order) or "" (neither)
    replay: str = ""

    @property
    def key(self) -> str:
        return f"{self.side} {self.order}"


@dataclass
class RunOutput:
    """What a run left, for comparison: final (and some initial) contents, launch records; or
    the error it raised (`error`: message, location, notes)."""

    final: dict[str, np.ndarray] = field(default_factory=dict)
    initial: dict[str, np.ndarray] = field(default_factory=dict)
    launches: list = field(default_factory=list)
    seconds: float = 0.0
    replayed: int = 0  # launches replayed from the leader's records
    error: tuple[str, Location | None, tuple[str, ...]] | None = None
    ticks: list[tuple[str, int, int]] = field(default_factory=list)  # a worker's progress

    def raise_error(self) -> None:
        if self.error is not None:
            message, loc, notes = self.error
            raise SiriusError(message, loc, notes)


class LazyProgram:
    """A program as the executor loads it (`device_ir`, `device_module`, `files`), its device
    module parsed only when this process needs its view (the executor's rewritten module is
    usually cached by the IR text); `module`, when the caller has it parsed already."""

    def __init__(self, device_ir: str, files: tuple, module: object | None = None):
        self.device_ir, self.files = device_ir, files
        if module is not None:
            self.__dict__["device_module"] = module

    @functools.cached_property
    def device_module(self) -> object:
        from sirius.frontend import llvmctx

        return llvmctx.parse(self.device_ir)


_CTX: RunContext | None = None
_QUEUE = None
_PARSED: dict[str, LazyProgram] = {}


def _program(side: str) -> LazyProgram:
    if side not in _PARSED:
        _, ir, files = getattr(_CTX, side)
        _PARSED[side] = LazyProgram(ir, tuple(files))
    return _PARSED[side]


def _init(ctx: RunContext, q, jit_parts: str | None = None) -> None:
    global _CTX, _QUEUE
    die_with_parent()  # a forked worker has it from the fork on (_forkchild); spawned, here
    _CTX, _QUEUE = ctx, q
    _PARSED.clear()
    if jit_parts is not None:  # unless the user set it
        os.environ.setdefault("SIRIUS_JIT_PARTS", jit_parts)


def _run(spec: RunSpec, jobs: int | None, tick: Callable[[str, int, int], None] | None,
         program: LazyProgram | None = None, bar: bool = False) -> RunOutput:
    """One run; `bar`: the executor shows long launches' progress itself (a worker does not:
    its stderr is shared)."""
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    ctx = _CTX
    assert ctx is not None
    host = getattr(ctx, spec.side)[0]
    prog = program or _program(spec.side)
    dev = CpuDevice(order=spec.order, seed=ctx.seed, jobs=jobs, check_bounds=spec.check_bounds,
                    progress=bar)
    report = None if tick is None else (lambda done, total: tick(spec.key, done, total))
    hook = None
    if ctx.replay is not None and spec.replay:
        kind = Recorder if spec.replay == "record" else Player
        hook = kind(ctx.replay, prog.device_ir, spec.check_bounds)
    t0 = time.perf_counter()
    try:
        r = run_host_program(host, prog, ctx.kernels[spec.side], dev, seed=ctx.seed,
                             order=spec.order, dtypes=ctx.dtypes, progress=report,
                             replay=hook)
    except SiriusError as e:
        return RunOutput(seconds=time.perf_counter() - t0,
                         error=(e.message, e.loc, tuple(e.notes)))
    finally:
        if isinstance(hook, Recorder):
            hook.finish()
    keep = ctx.keep[spec.side]
    return RunOutput({k: v for k, v in r.final.items() if k in keep},
                     {k: v for k, v in r.initial.items() if k in ctx.keep_initial},
                     r.launches, r.seconds, hook.replayed if isinstance(hook, Player) else 0)


def _worker(spec: RunSpec, jobs: int) -> RunOutput:
    """One run in a worker: progress goes through the queue as it happens, and comes back
    with the result too (the queue's feeder thread may deliver the last ticks after the
    result; the caller fills in what it has not seen)."""
    q = _QUEUE
    ticks: list[tuple[str, int, int]] = []

    def tick(key: str, done: int, total: int) -> None:
        ticks.append((key, done, total))
        q.put((key, done, total))

    out = _run(spec, jobs, tick)
    out.ticks = ticks
    return out


# Python's resource tracker (a process multiprocessing starts for the queues' semaphores) warns
# on stderr about each semaphore still registered when sirius ends: after a Ctrl-C, which
# leaves with os._exit (cli._interrupted), those lines came after "sirius: interrupted". It
# takes its warning filters from ours as it starts (`-W`); it still unlinks what is left.
_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def pool_context():
    """The start method of the workers: a fork server where there is one, whose forked
    workers stay quiet when sirius ends before telling them their work (`_forkchild`)."""
    if _TRACKER_QUIET not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_QUIET)
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    mctx = mp.get_context("forkserver")
    mctx.set_forkserver_preload(["sirius.verify._forkchild"])
    return mctx


def _end_pool(pool: ProcessPoolExecutor) -> None:
    """Shut `pool` down now, ending its worker processes (ours) that still run."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)


class HeadStart:
    """One run started ahead of the others, in a worker process of its own, while this process
    does other work: `sirius verify` runs the original program (the reference every fused run
    is compared with) while the fusion is built, on a core the fusion, one Python thread, leaves
    idle. `Runner.adopt` takes it over; `close` ends it if nobody does. Its executor module is
    compiled in one piece (jit.py compiles a large one on every core), so that the fusion keeps
    its core."""

    def __init__(self, ctx: RunContext, spec: RunSpec, message: str):
        self.ctx, self.spec, self.message = ctx, spec, message
        mctx = pool_context()
        self.queue = mctx.Queue()
        self.pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            1, mp_context=mctx, initializer=_init, initargs=(ctx, self.queue, "1"))
        self.future = self.pool.submit(_worker, spec, 1)

    def close(self) -> None:
        if self.pool is not None:
            _end_pool(self.pool)
            self.pool = None
        if self.queue is not None:
            self.queue.close()
            self.queue = None


class Prebuild:
    """The fused program's executor module (bounds-checked, as the fused runs load it), built
    in a worker process of its own as soon as the post-fusion passes are done, while this
    process emits PTX and runs ptxas: the fused runs then find it in the module cache, or wait
    on the cache's lock until it is there (jit.py). `close` ends it if it is still building
    (a later round of the fusion changed the module, or nothing is verified)."""

    def __init__(self, device_ir: str, files: tuple, data_bytes: int, check_bounds: bool):
        self.pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            1, mp_context=pool_context(), initializer=die_with_parent)
        self.future = self.pool.submit(_prebuild, device_ir, tuple(files), data_bytes,
                                       check_bounds)

    def close(self) -> None:
        if self.pool is not None:
            _end_pool(self.pool)
            self.pool = None


def _prebuild(device_ir: str, files: tuple, data_bytes: int, check_bounds: bool) -> None:
    from sirius.runtime.cpu.device import CpuDevice

    CpuDevice(check_bounds=check_bounds, progress=False).load_module(
        LazyProgram(device_ir, files), data_bytes=data_bytes)


class Runner:
    """Runs `RunSpec`s of one `RunContext`: over `jobs` worker processes (None: one per core;
    1: in this process, one after another). `tick(key, done, total)` is called after each
    launch of each run; `say(line)` gets notes (a fallback to serial)."""

    def __init__(self, ctx: RunContext, jobs: int | None = None,
                 tick: Callable[[str, int, int], None] | None = None,
                 say: Callable[[str], None] | None = None,
                 programs: dict[str, object] | None = None,
                 started: Callable[[str], None] | None = None):
        self.ctx = ctx
        self.workers = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
        self.tick = tick or (lambda _k, _d, _t: None)
        self.say = say or (lambda _line: None)
        self.programs = programs or {}  # side -> parsed program, for runs in this process
        self.started = started or (lambda _line: None)  # a run's message as it starts
        self.messages: dict[RunSpec, str] = {}
        self.notes: list[str] = []
        self.pool: ProcessPoolExecutor | None = None
        self.queue = None
        self.waiting: list[RunSpec] = []  # not yet started (serial) or not yet submitted
        self.futures: dict[Future, RunSpec] = {}
        self.cancelled: list[RunSpec] = []
        self.seen: dict[str, int] = {}  # run key -> launches reported (ticks come in order)
        self.heads: list[HeadStart] = []  # runs started ahead, adopted

    def __enter__(self) -> Runner:
        if self.workers > 1:
            try:
                mctx = pool_context()
                self.queue = mctx.Queue()
                self.pool = ProcessPoolExecutor(self.workers, mp_context=mctx,
                                                initializer=_init,
                                                initargs=(self.ctx, self.queue))
            except (OSError, ValueError, ImportError) as e:
                self._serial(f"no worker processes ({e}): the runs go one after another")
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None and not self.futures and exc[0] is None:
            self.pool.shutdown(wait=True)
            self.pool = None
        self.cancel()

    def _serial(self, why: str) -> None:
        self.notes.append(why)
        self.say("  " + why)
        self.pool = None
        self.workers = 1

    def submit(self, spec: RunSpec, message: str = "") -> None:
        """Queue a run; `message` is said as it starts (with a pool: as it is queued)."""
        self.messages[spec] = message or f"running {spec.key}"
        if self.pool is None:
            self.waiting.append(spec)
            return
        self.started(self.messages[spec])
        try:
            # each worker's forward order uses its share of the cores; a leader whose
            # followers replay most of its launches, all of them (sirius/verify/replay.py)
            jobs = max(1, (os.cpu_count() or 1) // self.workers)
            if spec.replay == "record" and self.ctx.replay is not None \
                    and self.ctx.replay.leader_cores:
                jobs = os.cpu_count() or 1
            self.futures[self.pool.submit(_worker, spec, jobs)] = spec
        except Exception as e:  # noqa: BLE001 - no worker started (a context that does not
            # pickle, no processes left): every run goes on here, as without a pool
            self._broken(e, spec)

    def adopt(self, head: HeadStart) -> None:
        """Take over a run started ahead: its result comes out of `results` like the others'."""
        self.started(head.message + " (started during the fusion)")
        self.heads.append(head)
        self.futures[head.future] = head.spec

    def pending(self) -> int:
        return len(self.futures) + len(self.waiting)

    def results(self) -> Iterator[tuple[RunSpec, RunOutput]]:
        """Finished runs as they finish, until none is pending (submit may add more)."""
        while self.futures or self.waiting:
            if self.futures:
                done, _ = wait(list(self.futures), timeout=0.25, return_when=FIRST_COMPLETED)
                self._drain()
                for f in done:
                    spec = self.futures.pop(f)
                    try:
                        out = f.result()
                        for key, d, total in out.ticks:  # what the queue has not brought yet
                            self._tick(key, d, total)
                        yield spec, out
                    except (BrokenProcessPool, OSError, EOFError, TypeError,
                            AttributeError) as e:  # a worker died, or a result did not pickle
                        self._broken(e, spec)
                continue
            spec = self.waiting.pop(0)
            self.started(self.messages.get(spec, f"running {spec.key}"))
            global _CTX
            _CTX = self.ctx
            prog = self.programs.get(spec.side)
            yield spec, _run(spec, None, self.tick, prog, bar=True)  # type: ignore[arg-type]

    def _broken(self, e: BaseException, spec: RunSpec) -> None:
        specs = [spec, *self.futures.values()]
        self.futures.clear()
        if self.pool is not None:
            self._stop_pool()
        self._serial(f"the worker processes failed ({type(e).__name__}: {e}); the runs go "
                     "on one after another in this process")
        self.waiting[:0] = specs  # said again as each starts

    def _stop_pool(self) -> None:
        """Shut the pool down now, ending its worker processes (ours) that still run."""
        assert self.pool is not None
        _end_pool(self.pool)
        self.pool = None

    def _drain(self) -> None:
        for q in (self.queue, *(h.queue for h in self.heads)):
            while q is not None:
                try:
                    key, done, total = q.get_nowait()
                except (queue.Empty, OSError, ValueError):
                    break
                self._tick(key, done, total)

    def _tick(self, key: str, done: int, total: int) -> None:
        """Report a worker's launch once, whichever way (queue or result) it comes first."""
        if done > self.seen.get(key, 0):
            self.seen[key] = done
            self.tick(key, done, total)

    def cancel(self) -> None:
        """Stop every run not finished: pending ones are dropped, running workers ended."""
        self.cancelled += [*self.futures.values(), *self.waiting]
        self.futures.clear()
        self.waiting.clear()
        if self.pool is not None:
            self._stop_pool()
        if self.queue is not None:
            self.queue.close()
            self.queue = None
        for h in self.heads:
            h.close()
