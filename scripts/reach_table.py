"""Launches, executor instructions and global bytes, original vs fused, for the programs of the
unrolling, repeated-member, min/max and launch DCE/CSE tests and the corpus programs those
change, with the default fusion and with `--unroll 0 --keep-launches` (BENCHMARKS.md, "Fusion
reach"). Every run is `sirius verify --json` (forward, reverse, random:7, bounds checked).

    .venv/bin/python scripts/reach_table.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("tests/fusion/unroll_programs/planes.cu", []),
    ("tests/fusion/unroll_programs/planes.cu", ["-DP=16"]),
    ("tests/fusion/unroll_programs/chunks.cu", ["-DFORM=0"]),
    ("tests/fusion/unroll_programs/chunks.cu", ["-DFORM=3"]),
    ("tests/fusion/unroll_programs/row_views.cu", []),
    ("tests/fusion/unroll_programs/row_views.cu", ["-DR=12"]),
    ("tests/fusion/unroll_programs/row_views.cu", ["-DFLOAT_ARG"]),
    ("tests/fusion/unroll_programs/rows_in_steps.cu", []),
    ("tests/fusion/prune_programs/dead_and_repeated.cu", ["-DCASE=0"]),
    ("tests/fusion/prune_programs/dead_and_repeated.cu", ["-DCASE=4"]),
    ("kernels/tvm/nasnet.cu", []),
    ("kernels/tvm/deepspeech2.cu", []),
    ("kernels/tvm/lstm.cu", []),
]


def row(path: str, flags: list[str], extra: list[str]) -> str:
    p = subprocess.run([sys.executable, "-m", "sirius.cli", "verify", path, *flags, *extra,
                        "-q", "--json"], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        return f"| {path} {' '.join(flags)} | {' '.join(extra) or 'default'} | exit " \
               f"{p.returncode}: {p.stderr.strip().splitlines()[-1:]} |"
    d = json.loads(p.stdout)
    o, f = d["counters"]["original"], d["counters"]["fused"]

    def gb(x: dict) -> int:
        return x["global_load_bytes"] + x["global_store_bytes"]

    return (f"| {Path(path).name} {' '.join(flags)} | {' '.join(extra) or 'default'} | "
            f"{o['launches']} -> {f['launches']} | {o['instructions']} -> "
            f"{f['instructions']} ({f['instructions'] / o['instructions']:.3f}) | {gb(o)} -> "
            f"{gb(f)} ({gb(f) / gb(o):.3f}) | {d['status']} |")


def main() -> int:
    print("| program | options | launches | instructions (fused / original) | global bytes "
          "| verify |")
    print("|---|---|---|---|---|---|")
    for path, flags in CASES:
        for extra in ([], ["--unroll", "0", "--keep-launches"]):
            print(row(path, flags, extra), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
