"""Run random whole CUDA programs through sirius and the CPU executor, against their references.

    python scripts/fuzz.py --count 1000 [--seed S] [--jobs N] [--keep DIR]

Program i uses generator seed S + i (and the executor's input seed S + i). Every failure prints
the one command that reproduces it: `python scripts/fuzz.py --seed S+i --count 1`. Exit status 1
when any program failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def one(seed: int, keep: str | None, order: str) -> tuple[int, list[str], int, int, float]:
    """(seed, problems, dynamic launches, dynamic instructions, seconds) of program `seed`."""
    from tests.randprog.check import check_program
    from tests.randprog.generator import generate

    t0 = time.perf_counter()
    prog = generate(seed)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="first generator seed")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    ap.add_argument("--order", default="forward", help="block order: forward, reverse, "
                    "random:SEED")
    ap.add_argument("--keep", metavar="DIR", help="write the programs to DIR")
    ap.add_argument("--show", action="store_true", help="print each program's source")
    args = ap.parse_args(argv)

    seeds = range(args.seed, args.seed + args.count)
    if args.show:
        from tests.randprog.generator import generate

        for s in seeds:
            print(generate(s).source)
    failures = 0
    launches = instructions = 0
    worst = (0.0, -1)
    most = (0, -1)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(one, s, args.keep, args.order) for s in seeds]
        for k, f in enumerate(futures, 1):
            seed, problems, nl, ni, secs = f.result()
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
