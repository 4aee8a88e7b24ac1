"""What `sirius tune -o DIR` writes: tune.json (every variant, its choices, estimate with
terms, verified or not), report.md, a self-contained report.html (plots as data URIs, the UAR
as a picture for small programs), uar.dot (its Graphviz text), and the chosen program in
DIR/chosen/ as `sirius fuse` writes it."""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

from sirius._version import __version__
from sirius.tune.model import TERM_NAMES, TERMS, ProgramEstimate, fmt_time
from sirius.tune.tuner import TuneResult, Variant

TUNE_SCHEMA = "sirius-tune/1"
ESTIMATE_NOTE = ("Every time in this report is an ESTIMATE of the cost model (docs/tune.md) "
                 "from exact CPU-executor counts and ptxas resources; nothing was measured on "
                 "a GPU.")
MAX_LAUNCHES = 200  # per-launch estimates kept in tune.json per variant


def _same_as(result: TuneResult, v: Variant) -> str | None:
    for w in [result.baseline] + result.variants:
        if w is v:
            return None
        if (w.result.ok and w.result.ir_sha == v.result.ir_sha
                and w.result.launches_after == v.result.launches_after
                and w.estimate is not None and v.estimate is not None
                and math.isclose(w.seconds, v.seconds)):
            return w.label
    return None


def speedups(result: TuneResult) -> dict:
    out = {}
    if result.chosen is not None:
        out["over_original"] = result.baseline.seconds / result.chosen.seconds
        d = result.default()
        if d is not None and d.estimate is not None:
            out["over_default_fuse"] = d.seconds / result.chosen.seconds
    return out


def variant_json(result: TuneResult, v: Variant) -> dict:
    r = v.result
    out = {
        "label": r.label, "original": r.original, "split_storage": r.split_storage,
        "choices": "original" if r.original else r.choices_list(),
        "launches": {"before": r.launches_before, "after": r.launches_after,
                     "run": len(r.counts)},
        "fused_kernels": list(r.fused), "undone": list(r.undone),
        "build_seconds": round(r.seconds, 3), "ir_sha": r.ir_sha,
        "same_program_as": _same_as(result, v),
        "error": r.error or None,
        "verified": v.verified, "verify_note": v.verify_note,
        "region_seconds": {str(k): x for k, x in sorted(v.region_seconds.items())},
        "estimate": v.estimate.to_json() if v.estimate is not None else None,
    }
    if v.estimate is not None:
        ests = v.estimate.launches[:MAX_LAUNCHES]
        out["launch_estimates"] = [
            {**e.to_json(), "counts": c.to_json()}
            for e, c in zip(ests, v.estimate.counts, strict=False)]
        out["launch_estimates_truncated"] = len(v.estimate.launches) > MAX_LAUNCHES
    return out


def tune_json(result: TuneResult) -> dict:
    return {
        "schema": TUNE_SCHEMA, "sirius": __version__, "estimate": True, "note": ESTIMATE_NOTE,
        "files": list(result.source.files), "arch": result.source.arch,
        "seed": result.source.seed, "gpu": result.gpu.to_json(),
        "assumptions": result.assumptions.to_json(), "ran_on": result.ran_on,
        "seconds": {k: round(x, 3) for k, x in result.seconds.items()},
        "chosen": result.chosen.label if result.chosen else None,
        "speedup_estimate": speedups(result),
        "region_choices": {("split" if k else "no split"): c
                           for k, c in result.region_choices.items()},
        "baseline": variant_json(result, result.baseline),
        "variants": [variant_json(result, v) for v in result.variants],
        "notes": list(result.notes),
    }


def bound_line(est: ProgramEstimate) -> str:
    """What bounds a program, in words: `DRAM bandwidth bounds 4 of 4 launches (100% of the
    estimated time)`, then the other bounds by share."""
    shares = est.bound_shares()
    if not shares:
        return "no bound: a launch cannot run (see its kernel below)"
    order = sorted(shares, key=lambda t: -shares[t][1])
    n = len(est.launches)
    parts = [f"{TERM_NAMES[t]} bounds {shares[t][0]} of {n} launches "
             f"({shares[t][1]:.0%} of the estimated time)" for t in order]
    return "; ".join(parts)


# markdown -----------------------------------------------------------------------------------------
def _row(result: TuneResult, v: Variant) -> list[str]:
    if v.estimate is None:
        return [v.label, "-", "-", "-", "build failed: " + v.result.error.splitlines()[0]]
    t = v.estimate.terms()
    body = max(("dram", "compute", "issue"), key=lambda k: t[k])
    verdict = {True: "verified", False: "FAILED verification", None: "not verified"}[v.verified]
    if v.result.original:
        verdict = "reference"
    same = _same_as(result, v)
    mark = " (chosen)" if v is result.chosen else ""
    return [v.label + mark, f"{len(v.result.counts)}", fmt_time(v.seconds),
            f"launch {fmt_time(t['launch'])}; bodies {fmt_time(v.seconds - t['launch'])} "
            f"(mostly {body})", verdict + (f"; same program as {same}" if same else "")]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return out


def report_md(result: TuneResult) -> str:
    g = result.gpu
    files = ", ".join(result.source.files)
    lines = [f"# sirius tune: {files}", "", f"> {ESTIMATE_NOTE}", ""]
    sp = speedups(result)
    if result.chosen is not None:
        c = result.chosen
        lines += [f"**Chosen: {c.label}**, estimated {fmt_time(c.seconds)} on {g.name} vs "
                  f"{fmt_time(result.baseline.seconds)} for the original "
                  f"({sp['over_original']:.2f}x, estimate)"
                  + (f" and {sp['over_default_fuse']:.2f}x over `sirius fuse` defaults"
                     if "over_default_fuse" in sp else "")
                  + f"; verified on the CPU executor: {c.verify_note}.", ""]
    else:
        lines += ["**No variant was chosen**: none could be built and verified.", ""]
    lines += [f"- GPU: {g.name} ({g.arch}; {g.sms} SMs, {g.boost_mhz:g} MHz, "
              f"{g.dram_gbps:g} GB/s, {g.fp32_tflops} TFLOP/s FP32, launch "
              f"{g.launch_us:g} us: an assumption); program assembled for "
              f"{result.source.arch}",
              f"- model assumptions: {json.dumps(result.assumptions.to_json())}",
              f"- variants built: {result.ran_on}; "
              + ", ".join(f"{k} {x:.1f} s" for k, x in result.seconds.items()), ""]
    lines += ["## Variants (estimates)", ""]
    lines += _table(["variant", "launches run", "estimated time", "terms", "verification"],
                    [_row(result, v) for v in [result.baseline] + result.variants])
    if result.region_choices:
        lines += ["", "## Per-region choice", "",
                  "Each region takes the choice whose launches are estimated fastest "
                  "(docs/tune.md)."]
        for split, cs in result.region_choices.items():
            lines.append(f"- storage split {'on' if split else 'off'}: "
                         + ", ".join(f"region {i}: {c}" for i, c in enumerate(cs)))
    for title, v in (("Original program", result.baseline), ("Chosen program", result.chosen)):
        if v is None or v.estimate is None:
            continue
        lines += ["", f"## {title}: why each kernel takes its time (estimates)", "",
                  f"Bound: {bound_line(v.estimate)}.", ""]
        lines += _table(["kernel", "launches", "estimated time", "bound", "explanation"],
                        [[k.kernel, str(k.launches), fmt_time(k.seconds), TERM_NAMES[k.bound],
                          k.explain] for k in v.estimate.kernels])
    if result.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in result.notes]
    lines += ["", "## Where the GPU's numbers come from", ""]
    lines += [f"- {k}: {s}" for k, s in g.sources]
    return "\n".join(lines) + "\n"


# html ---------------------------------------------------------------------------------------------
_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;
padding:3px 6px;text-align:left;vertical-align:top}th{background:#f2f4f7}.note{background:#fff6d6;
border-left:4px solid #e0b000;padding:.5em 1em}.chosen{background:#e8f4ea}img{max-width:100%}
code{font-size:12px}"""


def _plot(draw, result: TuneResult, alt: str) -> str:
    """A plot as an image, or a note when matplotlib is missing (the rest of the report
    does not need it)."""
    from sirius.diagnostics import SiriusError

    try:
        return _img(draw(result), alt)
    except SiriusError as err:
        e = html.escape
        return f"<p class='note'>Plot not drawn ({e(alt)}): {e(err.message)}</p>"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def report_html(result: TuneResult, pic=None) -> str:
    """The self-contained HTML report; `pic` is the UAR picture if already drawn."""
    from sirius.tune import plots

    e = html.escape
    g = result.gpu
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>sirius tune: "
             f"{e(', '.join(result.source.files))}</title><style>{_CSS}</style></head><body>",
             f"<h1>sirius tune: {e(', '.join(result.source.files))}</h1>",
             f"<p class='note'>{e(ESTIMATE_NOTE)}</p>"]
    sp = speedups(result)
    if result.chosen is not None:
        c = result.chosen
        over_default = (f" and <b>{sp['over_default_fuse']:.2f}x</b> over <code>sirius fuse"
                        "</code> defaults" if "over_default_fuse" in sp else "")
        parts.append(f"<p><b>Chosen: {e(c.label)}</b>, estimated {fmt_time(c.seconds)} on "
                     f"{e(g.name)} vs {fmt_time(result.baseline.seconds)} for the original "
                     f"(<b>{sp['over_original']:.2f}x</b>{over_default}, estimates); verified "
                     f"on the CPU executor: {e(c.verify_note)}.</p>")
    bounds = [(t, v) for t, v in (("original", result.baseline), ("chosen", result.chosen))
              if v is not None and v.estimate is not None]
    if bounds:
        parts.append("<p>What bounds it (estimate): " + "; ".join(
            f"<b>{t}</b>: {e(bound_line(v.estimate))}" for t, v in bounds) + ".</p>")
    else:
        parts.append("<p><b>No variant was chosen</b>: none could be built and verified.</p>")
    parts.append(_plot(plots.variant_times, result, "estimated time per variant"))
    rows = "".join(
        f"<tr class='{'chosen' if v is result.chosen else ''}'>"
        + "".join(f"<td>{e(x)}</td>" for x in _row(result, v)) + "</tr>"
        for v in [result.baseline] + result.variants)
    parts.append("<h2>Variants (estimates)</h2><table><tr><th>variant</th><th>launches run</th>"
                 "<th>estimated time</th><th>terms</th><th>verification</th></tr>"
                 f"{rows}</table>")
    pic = pic or uar_picture(result)
    if pic is not None:
        parts.append("<h2>The program's UAR</h2><p>Statements (launches as boxes) and their "
                     "dependences, coloured by width (green THREAD, blue dashed BLOCK, red "
                     "bold GLOBAL, grey dotted control); the launches each fused kernel of the "
                     f"chosen variant took are framed together. {e(pic.how)}.</p>")
        if pic.png is not None:
            parts.append(_img(pic.png, "the UAR with the chosen variant's fused kernels"))
    parts.append(_plot(plots.roofline, result, "per-kernel roofline before and after fusion"))
    parts.append(_plot(plots.before_after, result, "launches, instructions, bytes"))
    for title, v in (("Original program", result.baseline), ("Chosen program", result.chosen)):
        if v is None or v.estimate is None:
            continue
        krows = "".join(f"<tr><td>{e(k.kernel)}</td><td>{k.launches}</td>"
                        f"<td>{fmt_time(k.seconds)}</td><td>{e(TERM_NAMES[k.bound])}</td>"
                        f"<td>{e(k.explain)}</td></tr>" for k in v.estimate.kernels)
        parts.append(f"<h2>{e(title)}: why each kernel takes its time (estimates)</h2>"
                     f"<p>Bound: {e(bound_line(v.estimate))}.</p><table>"
                     "<tr><th>kernel</th><th>launches</th><th>estimated time</th><th>bound</th>"
                     f"<th>explanation</th></tr>{krows}</table>")
    if result.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in result.notes)
                     + "</ul>")
    parts.append(f"<h2>The GPU: {e(g.name)}</h2><table>"
                 + "".join(f"<tr><th>{e(k)}</th><td>{e(str(x))}</td></tr>"
                           for k, x in g.to_json().items() if k != "sources")
                 + "</table><h3>Sources</h3><ul>"
                 + "".join(f"<li><b>{e(k)}</b>: {e(s)}</li>" for k, s in g.sources) + "</ul>")
    parts.append(f"<p>Model assumptions: <code>{e(json.dumps(result.assumptions.to_json()))}"
                 f"</code>; terms: {', '.join(TERMS)}.</p></body></html>")
    return "\n".join(parts) + "\n"


def uar_picture(result: TuneResult):
    """The UAR picture (uarplot.Picture) of the chosen variant's plan, None without a UAR."""
    from sirius.tune.uarplot import picture

    if result.uar is None:
        return None
    fused = result.chosen.result.fused if result.chosen is not None else ()
    return picture(result.uar, fused)


def write_outputs(result: TuneResult, out: Path) -> list[Path]:
    """tune.json, report.md, report.html and chosen/ (fused.ll, fused.ptx, plan.json,
    report.md) in `out` (created)."""
    from sirius.fusion.report import write_outputs as write_fused

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    pic = uar_picture(result)
    files = [("tune.json", json.dumps(tune_json(result), indent=1) + "\n"),
             ("report.md", report_md(result)), ("report.html", report_html(result, pic))]
    if pic is not None and pic.dot:
        files.append(("uar.dot", pic.dot))
    for name, text in files:
        p = out / name
        p.write_text(text)
        paths.append(p)
    if result.chosen_fuse is not None:
        paths += write_fused(result.chosen_fuse, out / "chosen")
    return paths
