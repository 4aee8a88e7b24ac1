"""Launches, executor instructions, global bytes, barriers and counter waits of the plain
fusion and of the `grid` and `counters` megakernel variants, each against the original
(BENCHMARKS.md, "Megakernels"). Every run
is `sirius verify --json` (forward, reverse, random:7, bounds checked), so each row is also a
verification.

    .venv/bin/python scripts/megakernel_table.py [PROGRAM.cu ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ["kernels/tvm/lstm.cu", "kernels/tvm/seq2seq.cu", "kernels/tvm/bert_qkv.cu",
            "kernels/tvm/bert_layer.cu", "kernels/tvm/resnext_block.cu", "kernels/tvm/mlp.cu",
            "kernels/matmul_bias_act.cu", "kernels/lstm_cell.cu", "kernels/tvm/deepspeech2.cu",
            "kernels/stencil_pingpong.cu", "kernels/two_mm.cu"]


def _verify(path: str, extra: list[str]) -> tuple[dict | None, float, str]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "sirius.cli", "verify", path, *extra, "-q",
                        "--json"], capture_output=True, text=True, cwd=ROOT)
    secs = time.perf_counter() - t
    if p.returncode != 0:
        return None, secs, (p.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(p.stdout), secs, ""


def _cell(c: dict, o: dict) -> str:
    gb = c["global_load_bytes"] + c["global_store_bytes"]
    ogb = o["global_load_bytes"] + o["global_store_bytes"]
    return (f"{c['launches']} | {c['instructions']} ({c['instructions'] / o['instructions']:.3f})"
            f" | {gb} ({gb / ogb:.3f}) | {c['barriers']} | {c.get('waits', 0)}")


def main(argv: list[str]) -> int:
    print("| program | variant | launches | instructions (/ original) | global bytes "
          "(/ original) | barriers | waits | verify | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in argv or PROGRAMS:
        for label, extra in (("plain fusion", []),
                             ("--megakernel grid", ["--megakernel", "grid"]),
                             ("--megakernel counters", ["--megakernel", "counters"])):
            d, secs, err = _verify(path, extra)
            if d is None:
                print(f"| {Path(path).name} | {label} | exit: {err} ||||||", flush=True)
                continue
            o, f = d["counters"]["original"], d["counters"]["fused"]
            if label == "plain fusion":
                print(f"| {Path(path).name} | original | {o['launches']} | {o['instructions']} |"
                      f" {o['global_load_bytes'] + o['global_store_bytes']} | {o['barriers']} "
                      "| 0 | | |", flush=True)
            print(f"| {Path(path).name} | {label} | {_cell(f, o)} | {d['status']} | "
                  f"{secs:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
