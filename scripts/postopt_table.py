"""Original vs fused without post-fusion passes vs fused with them, for every corpus program:
launches, dynamic instructions and global bytes (CPU executor), registers and static SASS
instructions (ptxas + nvdisasm, no GPU needed). The table of BENCHMARKS.md, "Post-fusion: the
whole corpus" (issue 14).

    .venv/bin/python scripts/postopt_table.py [--arch sm_80] [--orders forward,reverse,random:7]
        [--ablate] [--arrangement auto|vertical|horizontal] [--json OUT.json] [FILES...]

"Without postopt" is the fused module cleaned by LLVM's O3 only (`-p 'llvm-opt{level=3,
rounds=2}'`, the pipeline fusion had before issue 14); `--no-postopt` leaves even that out, which
measures unoptimised IR, not what the passes add. Without FILES: kernels/*.cu and
kernels/tvm/*.cu. Every fused program is verified against the
original in each of `--orders` (the counters are those of the first); a row whose verify fails
says MISMATCH. Static figures are over the kernels the program launches (each distinct kernel
once): `regs` is the most registers of any of them, `sass` the sum of their SASS instructions
(alignment NOPs not counted). `--ablate` adds, per pass of the default list other than
llvm-opt, the instructions with that pass left out (forward order only).
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


def static_figures(device_ir: str, launched: set[str], arch: str) -> tuple[int, int]:
    """(most registers, total SASS instructions) over the launched kernels of a module."""
    from sirius.backend.ptx import compile_ir
    from sirius.backend.sass import sass_counts

    ptx, report = compile_ir(device_ir, arch)
    sass = sass_counts(ptx.text, arch)
    missing = launched - set(report.kernels)
    if missing:
        raise SystemExit(f"kernels launched but not in the module: {sorted(missing)}")
    return (max(report.kernels[k].registers for k in launched),
            sum(sass[k] for k in launched))


def measure(path: Path, arch: str, orders: tuple[str, ...], ablate: bool,
            arrangement: str = "auto") -> dict:
    from sirius.fusion.plan.planner import Options
    from sirius.pipeline import fuse
    from sirius.postopt import DEFAULT_PASSES, LlvmOpt
    from sirius.verify.differential import verify_fused

    row: dict = {"program": str(path.relative_to(ROOT) if path.is_absolute() else path)}
    t0 = time.perf_counter()
    for label, passes in (("nopost", (LlvmOpt(level=3, rounds=2),)), ("post", None)):
        res = fuse([path], Options(arch=arch, arrangement=arrangement), passes=passes)
        rep = verify_fused(res.original, res, seed=7, orders=orders)
        if label == "nopost":
            o = rep.original_counters
            orig = {m.mangled for m in res.original.host.launches()}
            regs, sass = static_figures(res.original.program.device_ir, orig, arch)
            row["original"] = {**o.to_json(), "registers": regs, "sass": sass}
        f = rep.fused_counters
        regs, sass = static_figures(res.device_ir, {m.mangled for m in res.host.launches()},
                                    arch)
        row[label] = {**f.to_json(), "registers": regs, "sass": sass,
                      "verify": "ok" if rep.ok else "MISMATCH"}
    if ablate:
        row["without"] = {}
        for p in DEFAULT_PASSES:
            if p.name == "llvm-opt":
                continue
            res = fuse([path], Options(arch=arch, arrangement=arrangement),
                       passes=tuple(q for q in DEFAULT_PASSES if q is not p))
            rep = verify_fused(res.original, res, seed=7, orders=orders[:1])
            row["without"][p.name] = {"instructions": rep.fused_counters.instructions,
                                      "global_bytes": gbytes(rep.fused_counters.to_json()),
                                      "verify": "ok" if rep.ok else "MISMATCH"}
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def ratio(row: dict, label: str, key: str) -> float:
    return row[label][key] / row["original"][key] if row["original"][key] else 1.0


def gbytes(c: dict) -> int:
    return c["global_load_bytes"] + c["global_store_bytes"]


def markdown(row: dict) -> str:
    o, n, p = row["original"], row["nopost"], row["post"]
    cells = [row["program"],
             f"{o['launches']} / {n['launches']} / {p['launches']}",
             f"{o['instructions']} / {n['instructions']} / {p['instructions']}",
             f"{o['instructions'] and n['instructions'] / o['instructions']:.3f} / "
             f"{o['instructions'] and p['instructions'] / o['instructions']:.3f}",
             f"{gbytes(o)} / {gbytes(n)} / {gbytes(p)}",
             f"{gbytes(n) / gbytes(o):.3f} / {gbytes(p) / gbytes(o):.3f}",
             f"{o['registers']} / {n['registers']} / {p['registers']}",
             f"{o['sass']} / {n['sass']} / {p['sass']}",
             f"{n['verify']} / {p['verify']}"]
    if "without" in row:
        cells.append(", ".join(_without(k, v, p) for k, v in row["without"].items()
                               if v["instructions"] != p["instructions"]
                               or v.get("global_bytes", gbytes(p)) != gbytes(p))
                     or "-")
    return "| " + " | ".join(cells) + " |"


def _without(name: str, without: dict, post: dict) -> str:
    """One pass's ablation cell: instructions (and global bytes where they differ) with the
    pass left out, over those with every pass; a row that failed verify says so."""
    text = f"{name}: {without['instructions'] / post['instructions']:.3f}"
    if "global_bytes" in without and without["global_bytes"] != gbytes(post):
        text += f" (bytes {without['global_bytes'] / gbytes(post):.3f})"
    return text + ("" if without["verify"] == "ok" else " MISMATCH")


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--orders", default="forward,reverse,random:7")
    ap.add_argument("--ablate", action="store_true")
    ap.add_argument("--arrangement", default="auto", choices=("auto", "vertical", "horizontal"))
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
    files = [Path(f).resolve() for f in args.files] or \
        sorted((ROOT / "kernels").glob("*.cu")) + sorted((ROOT / "kernels" / "tvm").glob("*.cu"))
    orders = tuple(args.orders.split(","))
    head = ["program", "launches", "instructions", "instr. ratio", "global bytes",
            "bytes ratio", "registers (max)", "SASS instr.", "verify"]
    if args.ablate:
        head.append("without one pass / with all: instructions (global bytes)")
    print("Columns: original / fused without postopt / fused with postopt; ratios fused / "
          "original without / with.\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows, bad = [], 0
    for f in files:
        row = measure(f, args.arch, orders, args.ablate, args.arrangement)
        rows.append(row)
        bad += "MISMATCH" in (row["nopost"]["verify"], row["post"]["verify"],
                              *(v["verify"] for v in row.get("without", {}).values()))
        print(markdown(row), flush=True)
    for group, pick in (("hand-written", lambda r: "/tvm/" not in f"/{r['program']}"),
                        ("TVM", lambda r: "/tvm/" in f"/{r['program']}"
                         and "/paper/" not in r["program"]),
                        ("TVM paper shapes", lambda r: "/paper/" in r["program"])):
        sel = [r for r in rows if pick(r)]
        if not sel:
            continue
        parts = []
        for key, name in (("instructions", "instructions"), (None, "global bytes"),
                          ("sass", "SASS"), ("registers", "registers")):
            vals = []
            for label in ("nopost", "post"):
                xs = [(gbytes(r[label]) / gbytes(r["original"])) if key is None
                      else ratio(r, label, key) for r in sel]
                vals.append(f"{geomean(xs):.3f}")
            parts.append(f"{name} {' / '.join(vals)}")
        print(f"\nGeometric mean fused / original, {group} ({len(sel)} programs), without / "
              f"with postopt: " + "; ".join(parts))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
