"""Turn per-launch GPU timings (`sirius bench --per-launch --json`, e.g. a gpu_campaign.py
folder) into a RUNS.json for `sirius tune --calibrate` (schema sirius-runs/1, docs/tune.md).

    python3 scripts/bench_to_runs.py CAMPAIGN_DIR TUNE_ROOT -o RUNS.json [--gpu H200] [--whole]
                                     [--inline]

CAMPAIGN_DIR holds VARIANT__STEM.json bench results (VARIANT: def, grid or counters, as
gpu_campaign.py names them); TUNE_ROOT/STEM/tune.json is `sirius tune PROGRAM --measure off -o
TUNE_ROOT/STEM` of the same program (its launch estimates hold the counts). Each measured
launch becomes one measurement that points into tune.json: the bench's original program into
the baseline (`original`), the fused program into the variant built the same way (`auto` for
`sirius fuse`'s defaults, `megakernel grid`, `megakernel counters`). A side whose launches do
not match the variant's one by one (kernel, grid, block) is left out, and said.

With `--whole`, each program's CUDA-graph replay is one measurement instead (`"kernel": "*"`,
every launch of the variant; a variant whose launches tune.json does not all keep is left
out): no host issues anything between its launches, so the launch overhead fitted is the
graph's.

With `--inline`, each measurement holds its launches' counts (`"launches"`) instead of a
reference into tune.json: the RUNS.json then stands alone (docs/measurements/ keeps one).

What a launch's time is: the eager replay records a CUDA event after every operation, so a
launch is timed from the event before it to the one after; when the host issues launches more
slowly than the GPU runs them (Python, a few microseconds per launch), that includes the GPU's
wait for the launch. The fitted launch overhead is then this host's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

TUNE_VARIANT = {"def": "auto", "grid": "megakernel grid", "counters": "megakernel counters"}


def _variant(doc: dict, label: str) -> dict | None:
    for v in [doc.get("baseline")] + list(doc.get("variants") or []):
        if isinstance(v, dict) and v.get("label") == label and v.get("launch_estimates"):
            return v
    return None


def _matches(rows: list[dict], les: list[dict]) -> str:
    """"" when the measured launches are the variant's, one by one; else why not."""
    if len(rows) > len(les):
        return f"{len(rows)} measured launches, {len(les)} launch estimates"
    for r, e in zip(rows, les, strict=False):
        c = e.get("counts") or {}
        if (r["kernel"], list(r["grid"]), list(r["block"])) != \
                (c.get("kernel"), list(c.get("grid", ())), list(c.get("block", ()))):
            return (f"launch {r['index']}: measured {r['kernel']} {r['grid']} {r['block']}, "
                    f"estimated {c.get('kernel')} {c.get('grid')} {c.get('block')}")
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign")
    ap.add_argument("tune_root")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--gpu", default="H200", help="the table entry the counts are costed with")
    ap.add_argument("--inline", action="store_true",
                    help="write the launches' counts into RUNS.json (no tune.json needed)")
    ap.add_argument("--whole", action="store_true",
                    help="one measurement per program: its CUDA-graph replay's median")
    args = ap.parse_args(argv)
    out = Path(args.output).resolve()
    measurements, device, skipped = [], "", []
    for f in sorted(Path(args.campaign).glob("*__*.json")):
        variant, stem = f.stem.split("__", 1)
        tune = Path(args.tune_root) / stem / "tune.json"
        if variant not in TUNE_VARIANT or not tune.exists():
            continue
        bench = (json.loads(f.read_text()).get("bench") or {})
        device = device or bench.get("device", {}).get("name", "")
        doc = json.loads(tune.read_text())
        for side, label in (("original", "original"), ("fused", TUNE_VARIANT[variant])):
            if variant != "def" and side == "original":
                continue  # the same original as the def run's
            rows = (bench.get("launch_timings") or {}).get(side) or []
            v = _variant(doc, label)
            why = "no per-launch timings" if not rows else \
                f"tune.json has no variant {label!r}" if v is None else \
                _matches(rows, v["launch_estimates"])
            if why:
                skipped.append(f"{f.stem} {side}: {why}")
                continue
            rel = os.path.relpath(tune, out.parent)
            les = v["launch_estimates"]

            def counts(idx: list[int], rel=rel, label=label, les=les) -> dict:
                """The launches: a reference into tune.json, or (--inline) their counts."""
                if args.inline:
                    return {"launches": [les[i]["counts"] for i in idx]}
                return {"from": {"tune_json": rel, "variant": label, "launches": idx}}
            if args.whole:
                n = len(les)
                graph = (bench.get("timings") or {}).get(f"{side}_graph")
                if graph is None or n != len(rows) or v.get("launch_estimates_truncated"):
                    skipped.append(f"{f.stem} {side}: no graph timing, or tune.json keeps "
                                   f"{n} of its launches")
                    continue
                measurements.append({
                    "kernel": "*", "measured_us": graph["median_us"],
                    "p10_us": graph["p10_us"], "p90_us": graph["p90_us"],
                    "label": f"{stem} {side if side == 'original' else label} (graph, "
                             f"{n} launches)",
                    **counts(list(range(n)))})
                continue
            for r in rows:
                measurements.append({
                    "kernel": r["kernel"], "measured_us": r["median_us"],
                    "p10_us": r["p10_us"], "p90_us": r["p90_us"],
                    "label": f"{stem} {side if side == 'original' else label}: "
                             f"launch {r['index']} ({r['kernel']})",
                    **counts([r["index"]])})
    if not measurements:
        print("no measurement matched a tune.json", file=sys.stderr)
        return 2
    doc = {"schema": "sirius-runs/1", "gpu": args.gpu, "device": device,
           "method": ("sirius bench: median of a whole program's CUDA-graph replays"
                      if args.whole else "sirius bench --per-launch: median of the eager "
                      "runs' per-launch event intervals") + " (scripts/bench_to_runs.py)",
           "measurements": [m for m in measurements if m["measured_us"] > 0]}
    out.write_text(json.dumps(doc, indent=1))
    print(f"{len(doc['measurements'])} measurements written to {out}")
    for s in skipped:
        print(f"left out: {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
