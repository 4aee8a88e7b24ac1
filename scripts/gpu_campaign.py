"""Bench every carried program on a lent GPU within a time budget (docs/gpu.md, BENCHMARKS.md).

    python3 scripts/gpu_campaign.py CARRY_ROOT OUT_DIR [--budget SECONDS] [--runs N]
                                    [--warmup N] [--input-sets N] [--per-program SECONDS]
                                    [--variants def,grid,counters]

CARRY_ROOT holds one folder per variant (e.g. `def`, `grid`, `counters`), each with one carried
program per sub-folder (`sirius bench PROGRAM.cu --prepare CARRY_ROOT/VARIANT/STEM`). Each
program is benched with `python3 -m sirius.cli.bench --from DIR --json --per-launch` (timings
of original and fused, and the check of both against the CPU executor's reference); its JSON
goes to OUT_DIR/VARIANT__STEM.json, and OUT_DIR/summary.json lists every program with its exit
status, wall time and the end of its stderr.

The programs run one after another in a worker process that benches them in turn (one Python
start, one CUDA context); a program that runs past --per-program seconds (a kernel that never
ends: a megakernel whose wait is never satisfied) kills the worker, is recorded as timed out,
and a new worker goes on with the rest. Programs not started when --budget seconds have passed
are recorded as skipped. Needs only what `python3 -m sirius.cli.bench` needs (numpy, pycuda,
cuda-python).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path


def _worker(out: Path, bench_args: list[str], dirs: list[str], save: bool) -> int:
    """Bench `dirs` in turn in this process; after each, one line `done NAME RC SECONDS` on
    stdout (the parent's record of progress)."""
    from sirius.cli.bench import main

    for d in dirs:
        name = _name(Path(d))
        print(f"start {name}", flush=True)
        t0 = time.monotonic()
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                keep = ["--save-outputs", str(out / f"{name}.npz")] if save else []
                rc = main(["--from", d, "--json", "-o", str(out / f"{name}.json"), *keep,
                           *bench_args])
        except BaseException as e:  # noqa: BLE001 - a crash of one program is its result
            rc = 3
            err.write(f"\n{type(e).__name__}: {e}")
        (out / f"{name}.err").write_text(err.getvalue())
        print(f"done {name} {rc} {time.monotonic() - t0:.2f}", flush=True)
    return 0


def _name(d: Path) -> str:
    return f"{d.parent.name}__{d.name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("carry_root")
    ap.add_argument("out_dir")
    ap.add_argument("--budget", type=float, default=360.0)
    ap.add_argument("--per-program", type=float, default=90.0)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--input-sets", type=int, default=2)
    ap.add_argument("--variants", default="",
                    help="comma-separated variant folders in the order to run them "
                         "(default: every folder, sorted)")
    ap.add_argument("--only", default="",
                    help="comma-separated VARIANT__STEM names: bench these alone")
    ap.add_argument("--check-only", action="store_true",
                    help="run both programs once and compare (no timing)")
    ap.add_argument("--no-per-launch", action="store_true",
                    help="time the eager runs without an event after every operation")
    ap.add_argument("--save", action="store_true",
                    help="also write each program's GPU outputs to OUT_DIR/VARIANT__STEM.npz")
    ap.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bench_args = (["--check-only"] if args.check_only else
                  [*([] if args.no_per_launch else ["--per-launch"]), "--runs", str(args.runs),
                   "--warmup", str(args.warmup), "--input-sets", str(args.input_sets)])
    if args.worker is not None:
        return _worker(out, bench_args, args.worker, args.save)

    root = Path(args.carry_root)
    variants = ([root / v for v in args.variants.split(",")] if args.variants
                else sorted(v for v in root.iterdir() if v.is_dir()))
    todo = [str(d) for v in variants
            for d in sorted(v.iterdir()) if (d / "carry.json").exists()]
    if args.only:
        todo = [d for d in todo if _name(Path(d)) in args.only.split(",")]
    t_start = time.monotonic()
    summary: dict[str, dict] = {}
    own = list(sys.argv[1:] if argv is None else argv)  # a worker gets the same options
    while todo and time.monotonic() - t_start < args.budget:
        cmd = [sys.executable, __file__, *own, "--worker", *todo]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        current, since, started, ended = None, time.monotonic(), 0, False
        while True:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                line = ""
            if line is None:
                ended = True
            word = (line or "").split()
            if word[:1] == ["start"]:
                current, since, started = word[1], time.monotonic(), started + 1
                print(f"[{time.monotonic() - t_start:6.1f} s] {current}", flush=True)
            elif word[:1] == ["done"]:
                name, rc, secs = word[1], int(word[2]), float(word[3])
                tail = _tail(out / f"{name}.err")
                summary[name] = {"rc": rc, "seconds": secs, "stderr_tail": tail}
                print(f"    rc {rc} in {secs:.1f} s", flush=True)
                todo = [d for d in todo if _name(Path(d)) != name]
                current = None
            if ended:
                proc.wait()
                break
            over_budget = time.monotonic() - t_start > args.budget
            if current and (time.monotonic() - since > args.per_program or over_budget):
                proc.kill()
                proc.wait()
                why = "budget" if over_budget else f"{args.per_program:.0f} s"
                summary[current] = {"rc": None, "seconds": time.monotonic() - since,
                                    "stderr_tail": f"killed: ran past {why}"}
                print(f"    killed after {time.monotonic() - since:.1f} s ({why})", flush=True)
                todo = [d for d in todo if _name(Path(d)) != current]
                current = None
                break
        if proc.returncode not in (0, None) and current:
            summary[current] = {"rc": proc.returncode, "seconds": time.monotonic() - since,
                                "stderr_tail": "the worker died"}
            todo = [d for d in todo if _name(Path(d)) != current]
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        if not started:
            print(f"the worker started no program (exit status {proc.returncode}): stopping",
                  flush=True)
            break
    for d in todo:
        summary[_name(Path(d))] = {"rc": None, "seconds": 0, "stderr_tail": "skipped: budget"}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    bad = {k: v for k, v in summary.items() if v["rc"] != 0}
    print(f"{len(summary) - len(bad)} of {len(summary)} programs benched and checked OK; "
          f"not OK: {', '.join(sorted(bad)) or 'none'}")
    return 0


def _pump(stream, lines: queue.Queue) -> None:
    """The worker's stdout, line by line, then None at its end."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def _tail(p: Path) -> str:
    try:
        return p.read_text()[-800:]
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
