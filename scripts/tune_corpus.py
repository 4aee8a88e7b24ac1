"""Run `sirius tune` on corpus programs, one at a time, and tabulate what each chose.

    .venv/bin/python scripts/tune_corpus.py kernels/*.cu kernels/tvm/*.cu \
        --out /tmp/tune_bench [--jobs 2] [--ray] [--timeout 600] [--json RESULTS.json]

For each program: the wall time of the whole `sirius tune` command (a subprocess, so every
program starts cold, as a user's command does), the chosen variant, and from its tune.json the
estimated speedup over the original and over `sirius fuse` defaults. Every time in tune.json is
an ESTIMATE of the cost model (docs/tune.md); the wall time is measured. A program that runs
past --timeout is stopped and reported as such.
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


def run_one(prog: Path, out: Path, jobs: int, ray: bool, timeout: float, gpu: str) -> dict:
    cmd = [sys.executable, "-m", "sirius.cli", "tune", str(prog), "-o", str(out), "-q",
           "--gpu", gpu] + (["--ray"] if ray else ["--jobs", str(jobs)])
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
               gpu=doc["gpu"]["name"])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--out", default="/tmp/tune_bench")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ray", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--gpu", default="H100 SXM")
    ap.add_argument("--json", help="append each result as a JSON line to this file")
    args = ap.parse_args(argv)
    for prog in map(Path, args.programs):
        name = prog.stem if prog.parent.name != "paper" else f"paper_{prog.stem}"
        row = run_one(prog, Path(args.out) / name, args.jobs, args.ray, args.timeout, args.gpu)
        line = json.dumps(row)
        print(line, flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
