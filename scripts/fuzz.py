"""Run random whole CUDA programs through sirius and the CPU executor, against their references.

    python scripts/fuzz.py --count 1000 [--seed S] [--jobs N] [--keep DIR]
    python scripts/fuzz.py --fuse --count 1000 [--seed S] [--jobs N] [--arrangement A]
    python scripts/fuzz.py ... --features -asm    # without inline PTX stores (on by default)

Program i uses generator seed S + i (and the executor's input seed S + i). Every failure prints
the one command that reproduces it: `python scripts/fuzz.py --seed S+i --count 1`. Exit status 1
when any program failed.

`--fuse`: each program is fused (`sirius.pipeline.fuse`, arrangement auto / vertical /
horizontal by seed % 3 unless `--arrangement` names one) and checked by
tests/randprog/fuse_check.py: the fused program against the original under the forward, reverse
and random:<seed> orders (`verify_fused`), and the fused outputs against the numpy reference.
The summary counts programs, failures and launches before/after fusion (host loops unrolled);
a failed program's .cu file stays on disk (`--keep DIR`, default a sirius-fuzz folder in the
temporary directory) and its reproduction command is printed.

`--features`: which constructs of issue 12 the generator uses (pointer tables, `__device__`
variables, `__noinline__` device functions, inline PTX stores; tests/randprog/extras.py):
"default", "none", "all", or +NAME / -NAME changes to the default. Ctrl-C stops the run with
exit status 130 and one line.

`--time-limit SECONDS` (default 300): a program that takes more CPU time than that (fusion,
verification and reference together) has its worker stopped and counts as a failure, named
with its reproduce command, and the run goes on (the limit is RLIMIT_CPU in the worker, so it
stops a hang inside isl's C code too). A stopped pool re-runs the programs that were in it one
at a time to name the one that ran long. 0: no limit.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _ignore_sigint() -> None:
    """Pool initializer: Ctrl-C is the main process's to handle (it stops the workers); a
    worker's own KeyboardInterrupt traceback would bury the one line it prints. The worker was
    forked with SIGINT blocked (`_submit`), so a Ctrl-C before this point is dropped here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _submit(pool: ProcessPoolExecutor, fn: Callable, *args):
    """pool.submit with SIGINT blocked while the workers are forked (the first submit starts
    them), so none can take a Ctrl-C before its initializer ignores it; a Ctrl-C meanwhile
    reaches this process when the mask is restored."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return pool.submit(fn, *args)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def worker_pool(jobs: int | None) -> Iterator[ProcessPoolExecutor]:
    """A process pool that, when the block is left by an exception (Ctrl-C), stops its workers
    at once instead of waiting for the programs they are running."""
    pool = ProcessPoolExecutor(jobs, initializer=_ignore_sigint)
    try:
        yield pool
    except BaseException:
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(5)
        raise
    pool.shutdown()


DIED = ("the worker process running this program died (killed by a signal: the executor "
        "crashed, e.g. SIGSEGV); the reproduce command shows it")
# the default --time-limit: CPU seconds one program may take (the slowest seeds of a 1000-program
# run take ~15 s on a 2-core VM; one program once sat > 25 min inside isl)
TIME_LIMIT = 300.0


def timed_out(limit: float) -> str:
    return (f"the program ran past the per-program limit of {limit:g} CPU seconds "
            "(`--time-limit`) and its worker was stopped (SIGXCPU): a hang or a pathological "
            "slowdown, e.g. in isl; the reproduce command with `--time-limit 0` added runs it "
            "without the limit")


def _limited(limit: float | None, fn: Callable, *args):
    """fn(*args) in a worker whose CPU time is limited to `limit` more seconds (RLIMIT_CPU: the
    kernel stops the process with SIGXCPU even inside C code such as isl, where no Python
    signal handler would run); the limit is lifted again when fn returns."""
    if limit is None:
        return fn(*args)
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = int(used + limit) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    try:
        return fn(*args)
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))


def outcomes(fn: Callable, tasks: list[tuple], jobs: int | None,
             limit: float | None = None) -> Iterator[tuple[int, object]]:
    """(index, fn(*task)) for every task, in order, computed in worker processes; a task whose
    worker dies gives DIED instead of ending the run, one that runs past `limit` CPU seconds
    gives timed_out(limit). After a pool breaks, the tasks that may have been running in it
    (the first jobs + 1 unfinished ones) run one at a time, each in a fresh worker, so the one
    that kills its worker is named; then the pool starts again."""
    todo = list(range(len(tasks)))
    alone = 0
    while todo:
        if alone:
            i = todo.pop(0)
            alone -= 1
            with worker_pool(1) as pool:
                t0 = time.perf_counter()
                try:
                    yield i, _submit(pool, _limited, limit, fn, *tasks[i]).result()
                except BrokenProcessPool:
                    # CPU time never exceeds wall time: a worker that died sooner than the
                    # limit was not stopped by it
                    over = limit is not None and time.perf_counter() - t0 >= limit
                    yield i, timed_out(limit) if over else DIED
            continue
        with worker_pool(jobs) as pool:
            futures = [(i, _submit(pool, _limited, limit, fn, *tasks[i])) for i in todo]
            for i, f in futures:
                try:
                    result = f.result()
                except BrokenProcessPool:
                    alone = (jobs or os.cpu_count() or 1) + 1
                    break
                todo.remove(i)
                yield i, result


def _features(spec: str):
    from tests.randprog.extras import Features

    return Features.parse(spec)


def one(seed: int, keep: str | None, order: str,
        features: str = "default") -> tuple[int, list[str], int, int, float]:
    """(seed, problems, dynamic launches, dynamic instructions, seconds) of program `seed`."""
    from tests.randprog.check import check_program
    from tests.randprog.generator import generate

    t0 = time.perf_counter()
    prog = generate(seed, features=_features(features))
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(keep) if keep else Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        try:
            out = check_program(prog, directory, seed=seed, order=order)
            problems, instructions = out.problems, out.instructions
        except Exception as e:  # noqa: BLE001 (a crash is a finding, with its traceback)
            problems = [f"{type(e).__name__}: {e}\n{traceback.format_exc()}"]
            instructions = 0
    return seed, problems, prog.dynamic_launches, instructions, time.perf_counter() - t0


def one_fused(seed: int, keep: str, keep_all: bool, arrangement: str | None,
              features: str = "default", megakernel: str | None = None, smem: str = "concat",
              unroll: int = 64):
    """The FuseOutcome of program `seed` (its file moved to `keep` when it failed or
    `keep_all`)."""
    from tests.randprog.fuse_check import FuseOutcome, crash_text, fuse_and_verify

    feats = _features(features)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            out = fuse_and_verify(seed, arrangement, tmp, raise_on_failure=False,
                                  features=feats, megakernel=megakernel, smem=smem,
                                  unroll=unroll)
        except Exception as e:  # noqa: BLE001 (generate or write crashed: still a finding)
            flag = f" --features {feats.spec()}" if feats.spec() else ""
            out = FuseOutcome(seed, arrangement or "?", Path(tmp) / f"randprog_{seed}.cu",
                              problems=[crash_text(e)], crashed=True,
                              reproduce=f".venv/bin/python scripts/fuzz.py --fuse --seed {seed} "
                                        f"--count 1{flag}")
        if (keep_all or not out.ok) and out.path.exists():
            dest = Path(keep) / out.path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(out.path.read_text())
            out.path = dest
    return out


def died_fused(seed: int, keep: str, args: argparse.Namespace, why: str = DIED):
    """The FuseOutcome of a program whose worker died or was stopped, `why` (its file written
    to `keep` here)."""
    from tests.randprog.fuse_check import FuseOutcome, reproduce_command
    from tests.randprog.fuse_check import arrangement_for as arrangement_of
    from tests.randprog.generator import generate

    feats = _features(args.features)
    arrangement = args.arrangement or arrangement_of(seed)
    Path(keep).mkdir(parents=True, exist_ok=True)
    path = generate(seed, features=feats).write(Path(keep))
    return FuseOutcome(seed, arrangement, path, problems=[why], crashed=True,
                       reproduce=reproduce_command(seed, arrangement, path, seed, feats,
                                                   args.megakernel, args.smem, args.unroll))


def main_fused(args: argparse.Namespace) -> int:
    seeds = range(args.seed, args.seed + args.count)
    keep = args.keep or str(Path(tempfile.gettempdir()) / "sirius-fuzz")
    every = max(1, min(100, args.count // 20))
    failures = crashes = timeouts = 0
    before = after = dyn_before = dyn_after = fusing = undone = 0
    worst = (0.0, -1)
    changed: Counter[str] = Counter()  # post-fusion pass -> programs it changed
    moved = 0  # programs with a vertical kernel reordered to share barriers
    looped = 0  # programs with a megakernel that runs a host loop inside it
    nested = 0  # of them, those where a whole loop nest runs inside it
    t0 = time.perf_counter()
    tasks = [(s, keep, bool(args.keep), args.arrangement, args.features, args.megakernel,
              args.smem, args.unroll) for s in seeds]
    for k, (i, out) in enumerate(outcomes(one_fused, tasks, args.jobs, args.time_limit), 1):
        if isinstance(out, str):  # DIED or timed out
            timeouts += out != DIED
            out = died_fused(seeds[i], keep, args, out)
        before += out.launches_before
        after += out.launches_after
        dyn_before += out.dynamic_before
        dyn_after += out.dynamic_after
        fusing += out.launches_after < out.launches_before
        undone += len(out.undone)
        changed.update(out.passes_changed)
        moved += out.code_motion > 0
        looped += out.device_loops > 0
        nested += out.device_nests > 0
        worst = max(worst, (out.seconds, out.seed))
        if not out.ok:
            failures += 1
            crashes += out.crashed
            what = "crashed" if out.crashed else "mismatch"
            print(f"FAIL seed {out.seed} ({out.arrangement}, {what}):", flush=True)
            for p in out.problems:
                print("    " + p.rstrip().replace("\n", "\n    "))
            print(f"    program: {out.path}")
            print(f"    reproduce: {out.reproduce}", flush=True)
        if k % every == 0 or k == args.count:
            print(f"... {k}/{args.count} programs, {failures} failed, launches {before} -> "
                  f"{after}, {time.perf_counter() - t0:.0f} s", flush=True)
    arr = args.arrangement or "auto/vertical/horizontal by seed % 3"
    print(f"fuse: {args.count} programs (seeds {args.seed}..{args.seed + args.count - 1}, "
          f"{arr}) in {time.perf_counter() - t0:.1f} s: {failures} failed ({failures - crashes} "
          f"mismatches, {crashes} crashes, {timeouts} of them over the time limit); launches "
          f"{before} -> {after} (executed "
          f"{dyn_before} -> {dyn_after}); {fusing} programs with fewer launches; "
          f"{undone} fused kernels undone; slowest seed {worst[1]} ({worst[0]:.2f} s)")
    print("post-fusion passes that changed the fused module: "
          + (", ".join(f"{n} in {c} programs" for n, c in sorted(changed.items())) or "none"))
    print(f"code motion (vertical members reordered to share barriers) in {moved} programs")
    if args.megakernel:
        print(f"host loops run inside a megakernel (device loops) in {looped} programs, a "
              f"whole loop nest in {nested} of them")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except KeyboardInterrupt:
        print("fuzz: interrupted", file=sys.stderr)
        return 130


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="first generator seed")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    ap.add_argument("--order", default="forward", help="block order: forward, reverse, "
                    "random:SEED")
    ap.add_argument("--keep", metavar="DIR", help="write the programs to DIR")
    ap.add_argument("--show", action="store_true", help="print each program's source")
    ap.add_argument("--fuse", action="store_true", help="fuse each program and verify the "
                    "fused program (against the original and the numpy reference)")
    ap.add_argument("--arrangement", choices=("auto", "vertical", "horizontal"),
                    help="with --fuse: one arrangement for every program (default: by seed "
                    "%% 3)")
    ap.add_argument("--smem", choices=("concat", "overlay"), default="concat",
                    help="with --fuse: vertical kernels' shared memory (`sirius fuse --smem`)")
    ap.add_argument("--megakernel", choices=("grid", "counters"),
                    help="with --fuse: every run of launches left after fusion becomes a "
                         "megakernel of this variant (`sirius fuse --megakernel`)")
    ap.add_argument("--unroll", type=int, default=64, metavar="N",
                    help="with --fuse: `sirius fuse --unroll` (0: host loops stay loops; with "
                    "--megakernel grid they then run on the device)")
    ap.add_argument("--features", default="default", metavar="SPEC",
                    help="the generator's constructs of issue 12: default, none, all, or "
                    "+NAME/-NAME changes (NAME: device-tables, globals, device-functions, "
                    "host-tables, asm), e.g. -host-tables,+asm")
    ap.add_argument("--time-limit", type=float, default=TIME_LIMIT, metavar="SECONDS",
                    help="CPU seconds one program may take before its worker is stopped and "
                    "the program counts as failed (default %(default)g; 0: no limit)")
    args = ap.parse_args(argv)
    if args.time_limit < 0:
        ap.error("--time-limit must be >= 0")
    args.time_limit = args.time_limit or None
    try:
        _features(args.features)
    except ValueError as e:
        ap.error(str(e))

    seeds = range(args.seed, args.seed + args.count)
    if args.show:
        from tests.randprog.generator import generate

        for s in seeds:
            print(generate(s, features=_features(args.features)).source)
    if args.fuse:
        return main_fused(args)
    failures = 0
    launches = instructions = 0
    worst = (0.0, -1)
    most = (0, -1)
    t0 = time.perf_counter()
    tasks = [(s, args.keep, args.order, args.features) for s in seeds]
    for k, (i, res) in enumerate(outcomes(one, tasks, args.jobs, args.time_limit), 1):
        seed, problems, nl, ni, secs = (seeds[i], [res], 0, 0, 0.0) if isinstance(res, str) \
            else res
        launches += nl
        instructions += ni
        worst = max(worst, (secs, seed))
        most = max(most, (ni, seed))
        if problems:
            failures += 1
            print(f"FAIL seed {seed}:", flush=True)
            for p in problems:
                print("    " + p.replace("\n", "\n    "))
            order = f" --order {args.order}" if args.order != "forward" else ""
            spec = _features(args.features).spec()
            order += f" --features {spec}" if spec else ""
            print(f"    reproduce: python scripts/fuzz.py --seed {seed} --count 1{order}",
                  flush=True)
        if k % 100 == 0:
            print(f"... {k}/{args.count} programs, {failures} failed", flush=True)
    print(f"{args.count} programs ({launches} launches, {instructions} thread instructions) in "
          f"{time.perf_counter() - t0:.1f} s: {failures} failed; slowest seed {worst[1]} "
          f"({worst[0]:.2f} s), most instructions seed {most[1]} ({most[0]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
