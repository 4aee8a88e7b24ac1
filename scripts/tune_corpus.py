"""Run `sirius tune` on corpus programs, one at a time, and tabulate what each chose.

    .venv/bin/python scripts/tune_corpus.py kernels/*.cu kernels/tvm/*.cu \
        --out /tmp/tune_bench [--jobs 2] [--ray] [--timeout 600] [--json RESULTS.jsonl]
        [--tune-arg=--megakernel-launches=1000 ...]
    .venv/bin/python scripts/tune_corpus.py --table RESULTS.jsonl [MORE.jsonl ...]

For each program: the wall time of the whole `sirius tune` command (a subprocess, so every
program starts cold, as a user's command does), the chosen variant, and from its tune.json the
estimated speedup over the original and over `sirius fuse` defaults. Every time in tune.json is
an ESTIMATE of the cost model (docs/tune.md); the wall time is measured. A program that runs
past --timeout is stopped and reported as such. `--table` prints the JSON lines of earlier runs
as the Markdown table of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(prog: Path, out: Path, jobs: int, ray: bool, timeout: float, gpu: str,
            extra: list[str] = ()) -> dict:
    cmd = [sys.executable, "-m", "sirius.cli", "tune", str(prog), "-o", str(out), "-q",
           "--gpu", gpu] + (["--ray"] if ray else ["--jobs", str(jobs)]) + list(extra)
    t = time.perf_counter()
    # its own process group, so that a time-out also stops its pool workers
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, start_new_session=True) as p:
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return {"program": str(prog), "status": f"stopped after {timeout:.0f} s",
                    "wall_s": round(time.perf_counter() - t, 1)}
    p = subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr)
    wall = time.perf_counter() - t
    row = {"program": str(prog), "wall_s": round(wall, 1), "rc": p.returncode}
    doc_path = out / "tune.json"
    if p.returncode != 0 or not doc_path.is_file():
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
        row["status"] = f"failed (exit {p.returncode}): {tail[0][:200]}"
        return row
    doc = json.loads(doc_path.read_text())
    chosen = next((v for v in doc["variants"] if v["label"] == doc["chosen"]), None)
    sp = doc["speedup_estimate"]
    row.update(status="ok", chosen=doc["chosen"], ran_on=doc["ran_on"],
               variants=len(doc["variants"]),
               launches_original=doc["baseline"]["launches"]["run"],
               launches_chosen=chosen["launches"]["run"] if chosen else None,
               est_original_us=doc["baseline"]["estimate"]["seconds"] * 1e6,
               est_chosen_us=chosen["estimate"]["seconds"] * 1e6 if chosen else None,
               over_original=sp.get("over_original"),
               over_default_fuse=sp.get("over_default_fuse"),
               gpu=doc["gpu"]["name"], seconds=doc.get("seconds"),
               megakernels=any(v["label"].startswith("megakernel") for v in doc["variants"]))
    return row


def _us(v) -> str:
    return "-" if v is None else f"{v:.3g} us"


def table(paths: list[str]) -> str:
    """The Markdown table of the JSON lines in `paths` (every time but the wall time is an
    ESTIMATE)."""
    head = ("| program | ran on | wall time (s) | variants | chosen | launches original -> "
            "chosen | est. original | est. chosen | est. speedup vs original | est. speedup "
            "vs fuse defaults |")
    out = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            prog = r["program"].removeprefix("kernels/")
            if r.get("status") != "ok":
                out.append(f"| {prog} | - | {r['wall_s']} | - | {r['status']} | - | - | - | - "
                           "| - |")
                continue
            ran = "Ray" if r["ran_on"] == "ray" else "pool"
            over = r.get("over_default_fuse")
            out.append(
                f"| {prog} | {ran} | {r['wall_s']} | {r['variants']} | {r['chosen']} | "
                f"{r['launches_original']} -> {r['launches_chosen']} | "
                f"{_us(r['est_original_us'])} | {_us(r['est_chosen_us'])} | "
                f"{r['over_original']:.2f}x | "
                f"{'-' if over is None else f'{over:.2f}x'} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--table", nargs="+", metavar="RESULTS.jsonl",
                    help="print these results as a Markdown table and stop")
    ap.add_argument("--tune-arg", action="append", default=[],
                    help="one more argument for every `sirius tune` (repeatable)")
    ap.add_argument("--out", default="/tmp/tune_bench")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ray", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--gpu", default="H100 SXM")
    ap.add_argument("--json", help="append each result as a JSON line to this file")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    for prog in map(Path, args.programs):
        name = prog.stem if prog.parent.name != "paper" else f"paper_{prog.stem}"
        row = run_one(prog, Path(args.out) / name, args.jobs, args.ray, args.timeout, args.gpu,
                      args.tune_arg)
        line = json.dumps(row)
        print(line, flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
