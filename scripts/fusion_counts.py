"""Launch counts before and after fusion for every corpus program, each verified on the CPU
executor (forward, reverse, random order): the table in BENCHMARKS.md.

    .venv/bin/python scripts/fusion_counts.py [--arrangement auto] [--no-verify] [FILES...]

Without FILES: the hand-written and small-shape TVM programs. Paper shapes:
`kernels/tvm/paper/*.cu` as FILES; `--no-verify` counts launches only (the largest paper models
take the CPU executor many minutes per run).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from sirius.fusion.plan.planner import Options
    from sirius.pipeline import fuse
    from sirius.verify.differential import ORDERS, verify_fused

    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--arrangement", default="auto")
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--no-verify", action="store_true", help="launch counts only")
    ap.add_argument("--order", action="append", default=None,
                    help="block/thread order of the fused runs, repeatable (default: forward, "
                    "reverse, random:1)")
    args = ap.parse_args()
    files = [Path(f) for f in args.files] or sorted((ROOT / "kernels").glob("*.cu")) + \
        sorted((ROOT / "kernels" / "tvm").glob("*.cu"))
    print("| program | launches before | after | fused kernels | verify | max abs diff "
          "| fuse s | verify s |")
    print("|---|---|---|---|---|---|---|---|")
    bad = 0
    for f in files:
        t0 = time.perf_counter()
        res = fuse([f], Options(arch=args.arch, arrangement=args.arrangement))
        t1 = time.perf_counter()
        kinds = Counter(r.arrangement for r in res.fused)
        names = len({r.name for r in res.fused})
        what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "-"
        if res.fused:
            what += f" ({names} distinct)"
        if args.no_verify:
            ok, diff, t2 = "not run", "-", t1
        else:
            rep = verify_fused(res.original, res, seed=7, orders=tuple(args.order or ORDERS))
            t2 = time.perf_counter()
            diff = f"{max((r.max_abs for r in rep.rows if r.max_abs is not None), default=0.0):.3g}"
            ok = "ok, bitwise" if rep.ok and all(r.bitwise for r in rep.rows) else \
                ("ok" if rep.ok else "MISMATCH")
            bad += not rep.ok
        rel = f.relative_to(ROOT) if f.is_absolute() else f
        print(f"| {rel} | {res.launches_before} | {res.launches_after} | {what} | {ok} | "
              f"{diff} | {t1 - t0:.1f} | {t2 - t1:.1f} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
