#!/usr/bin/env python3
"""Time the CPU executor: every corpus program, a 1M-thread elementwise kernel, a 64-block tiled
matmul, TVM's warp-shuffle reductions (a grouped convolution). Prints a Markdown table (paste it
into BENCHMARKS.md with the machine's description).

    .venv/bin/python scripts/bench_executor.py [--repeat 5] [--jobs N]

Each program is compiled and JIT-compiled once (warm-up run), then run `--repeat` times; the
table shows the median launch time summed over the program's launches, the dynamic LLVM IR
instructions the kernels executed, and instructions per second (instructions / kernel time).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sirius.runtime.interpreter import run_program  # noqa: E402


def bench(path: Path, repeat: int, jobs: int | None) -> dict:
    t0 = time.perf_counter()
    first = run_program([path], jobs=jobs)  # compile + JIT (cached afterwards) + one run
    cold = time.perf_counter() - t0
    kernel_s, total_s = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        r = run_program([path], jobs=jobs)
        total_s.append(time.perf_counter() - t)
        kernel_s.append(sum(rec.stats.seconds for rec in r.launches))
    instr = sum(rec.stats.instructions for rec in first.launches)
    modes = sorted({rec.stats.mode for rec in first.launches})
    k = statistics.median(kernel_s)
    return {"program": path.relative_to(ROOT).as_posix(), "launches": len(first.launches),
            "instructions": instr, "kernel_ms": k * 1e3,
            "run_ms": statistics.median(total_s) * 1e3, "cold_s": cold,
            "minstr_per_s": instr / k / 1e6 if k else float("nan"), "modes": "+".join(modes)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=None, help="workers (default: all cores)")
    args = ap.parse_args()
    programs = sorted((ROOT / "kernels").glob("*.cu")) + [
        ROOT / "scripts/bench/elementwise_1m.cu", ROOT / "scripts/bench/tiled_matmul_64.cu",
        ROOT / "scripts/bench/warp_reduce_conv.cu"]
    print(f"CPU executor on {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, jobs={args.jobs or 'all'}, median of {args.repeat}\n")
    print("| program | launches | path | IR instructions | kernel ms | whole run ms | "
          "M instr/s | first run s |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for p in programs:
        b = bench(p, args.repeat, args.jobs)
        print(f"| {b['program']} | {b['launches']} | {b['modes']} | {b['instructions']:,} | "
              f"{b['kernel_ms']:.2f} | {b['run_ms']:.1f} | {b['minstr_per_s']:.0f} | "
              f"{b['cold_s']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
