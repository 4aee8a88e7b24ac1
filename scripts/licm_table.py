"""What the `licm` pass adds to the default post-fusion list, per corpus program: dynamic
instructions (CPU executor), most registers and SASS instructions (ptxas, nvdisasm) of the
launched kernels, and verify in each order, for the default list without `licm`, the default
list (`licm` last, small loops left alone) and with `licm{small_trip=0}` (every loop). The table of
BENCHMARKS.md, "Post-fusion: licm" (issue 14 item 7).

    .venv/bin/python scripts/licm_table.py [--orders forward,reverse,random:7] [--json OUT]
        [FILES...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

VARIANTS = (("without licm", ""), ("default (licm)", ",licm"),
            ("licm{small_trip=0}", ",licm{small_trip=0}"))


def measure(path: Path, orders: tuple[str, ...]) -> dict:
    from postopt_table import static_figures

    from sirius.fusion.plan.planner import Options
    from sirius.pipeline import fuse
    from sirius.postopt import DEFAULT_PASSES, format_pipeline, parse_pipeline
    from sirius.verify.differential import verify_fused

    base = format_pipeline(p for p in DEFAULT_PASSES if p.name != "licm")
    row: dict = {"program": str(path.relative_to(ROOT))}
    t0 = time.perf_counter()
    for label, extra in VARIANTS:
        res = fuse([path], Options(), passes=parse_pipeline(base + extra))
        rep = verify_fused(res.original, res, seed=7, orders=orders)
        if "original" not in row:
            row["original"] = rep.original_counters.instructions
        regs, sass = static_figures(res.device_ir, {m.mangled for m in res.host.launches()},
                                    "sm_80")
        notes = [n for st in res.postopt if st.pass_text.startswith("licm") for n in st.notes]
        row[label] = {"instructions": rep.fused_counters.instructions, "registers": regs,
                      "sass": sass, "verify": "ok" if rep.ok else "MISMATCH",
                      "notes": [str(n) for n in notes]}
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--orders", default="forward,reverse,random:7")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    files = [Path(f).resolve() for f in args.files] or \
        sorted((ROOT / "kernels").glob("*.cu")) + sorted((ROOT / "kernels" / "tvm").glob("*.cu"))
    orders = tuple(args.orders.split(","))
    print("| program | original instr. | " + " | ".join(
        f"{v}: instr. / regs / SASS / verify" for v, _ in VARIANTS) + " |")
    print("|---|---:|" + "---|" * len(VARIANTS))
    rows, bad = [], 0
    for f in files:
        r = measure(f, orders)
        rows.append(r)
        bad += any(r[v]["verify"] != "ok" for v, _ in VARIANTS)
        cells = [f"{r[v]['instructions']} / {r[v]['registers']} / {r[v]['sass']} / "
                 f"{r[v]['verify']}" for v, _ in VARIANTS]
        print(f"| {r['program']} | {r['original']} | " + " | ".join(cells) + " |", flush=True)
    for v, _ in VARIANTS[1:]:
        xs = [r[v]["instructions"] / r["without licm"]["instructions"] for r in rows]
        print(f"\n{v} / without licm, geometric mean of instructions: "
              f"{math.exp(sum(map(math.log, xs)) / len(xs)):.4f}; programs changed: "
              f"{sum(x != 1 for x in xs)} of {len(xs)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
