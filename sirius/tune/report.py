"""What `sirius tune -o DIR` writes: tune.json (every variant, its choices, estimate with
terms, measured time when a GPU timed it, verified or not), report.md, a self-contained
report.html (plots as data URIs, the UAR as a picture for small programs), uar.dot (its
Graphviz text), the chosen program in DIR/chosen/ as `sirius fuse` writes it, and, when
measured, runs.json (the measurements, for `--calibrate`)."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from pathlib import Path

from sirius._version import __version__
from sirius.tune.measure import kernel_errors, paired
from sirius.tune.model import TERM_NAMES, TERMS, ProgramEstimate, fmt_time
from sirius.tune.tuner import TuneResult, Variant

TUNE_SCHEMA = "sirius-tune/1"
ESTIMATE_NOTE = ("Every time in this report is an ESTIMATE of the cost model (docs/tune.md) "
                 "from exact CPU-executor counts and ptxas resources; nothing was measured on "
                 "a GPU.")
MAX_LAUNCHES = 200  # per-launch estimates kept in tune.json per variant


def time_note(result: TuneResult) -> str:
    """What the times of the report are: estimates, and measurements when a GPU timed them."""
    m = result.measurement
    cal = (" The model's launch overhead, DRAM bandwidth and issue rate are calibrated from "
           f"{result.calibration.path} (see Calibration)." if result.calibration else "")
    if not m.on:
        return f"{ESTIMATE_NOTE} No GPU measurement: {m.why}.{cal}"
    return ("Times labelled ESTIMATE are the cost model's (docs/tune.md), from exact "
            "CPU-executor counts and ptxas resources; times labelled MEASURED were measured on "
            f"{m.device['name']} ({m.method}). The choice uses the measured times." + cal)


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
    """Estimated speed-ups of the chosen variant (over_*), and measured ones (measured_over_*)
    where both programs were measured."""
    out = {}
    c = result.chosen
    if c is not None:
        out["over_original"] = result.baseline.seconds / c.seconds
        d = result.default()
        if d is not None and d.estimate is not None:
            out["over_default_fuse"] = d.seconds / c.seconds
        for key, w in (("measured_over_original", result.baseline),
                       ("measured_over_default_fuse", d)):
            if w is not None and w.measured is not None and c.measured is not None \
                    and c.measured.median_s > 0:
                out[key] = w.measured.median_s / c.measured.median_s
    return out


def variant_json(result: TuneResult, v: Variant) -> dict:
    r = v.result
    out = {
        "label": r.label, "original": r.original, "split_storage": r.split_storage,
        "choices": "original" if r.original else r.choices_list(),
        "megakernel": r.megakernel,
        "passes_off": list(r.without), "smem": r.smem,
        "trade_off_passes_changed": list(r.changed_passes),
        "launches": {"before": r.launches_before, "after": r.launches_after,
                     "run": len(r.counts)},
        "fused_kernels": list(r.fused), "undone": list(r.undone),
        "build_seconds": round(r.seconds, 3), "ir_sha": r.ir_sha,
        "same_program_as": _same_as(result, v),
        "error": r.error or None,
        "verified": v.verified, "verify_note": v.verify_note,
        "region_seconds": {str(k): x for k, x in sorted(v.region_seconds.items())},
        "estimate": v.estimate.to_json() if v.estimate is not None else None,
        "measured": v.measured.to_json() if v.measured is not None else None,
        "measure_note": v.measure_note,
    }
    if v.estimate is not None:
        ests = v.estimate.launches[:MAX_LAUNCHES]
        m = v.measured
        times = m.launches if m is not None and paired(v.estimate.counts, m) else None
        out["launch_estimates"] = [
            {**e.to_json(), "counts": c.to_json(),
             **({"measured_s": times[i].median_s, "measured_p10_s": times[i].p10_s,
                 "measured_p90_s": times[i].p90_s} if times else {})}
            for i, (e, c) in enumerate(zip(ests, v.estimate.counts, strict=False))]
        out["launch_estimates_truncated"] = len(v.estimate.launches) > MAX_LAUNCHES
        if m is not None:
            out["kernels_measured"] = [k.to_json() for k in kernel_errors(v.estimate, m)]
            out["relative_error"] = (v.seconds - m.median_s) / m.median_s \
                if m.median_s else None
    return out


def tune_json(result: TuneResult) -> dict:
    return {
        "schema": TUNE_SCHEMA, "sirius": __version__, "estimate": True,
        "measured": result.measurement.on, "note": time_note(result),
        "files": list(result.source.files), "arch": result.source.arch,
        "seed": result.source.seed, "gpu": result.gpu.to_json(),
        "assumptions": result.assumptions.to_json(), "ran_on": result.ran_on,
        "fanout": result.fanout,
        "seconds": {k: round(x, 3) for k, x in result.seconds.items()},
        "chosen": result.chosen.label if result.chosen else None,
        "chosen_by": result.chosen_by,
        "measurement": result.measurement.to_json(),
        "calibration": result.calibration.to_json() if result.calibration else None,
        "speedup_estimate": {k: x for k, x in speedups(result).items()
                             if not k.startswith("measured")},
        "speedup_measured": {k.removeprefix("measured_"): x for k, x in speedups(result).items()
                             if k.startswith("measured")},
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
    """A variants-table row; with measurement on, the measured time and the model's error
    come after the estimate."""
    measured = result.measurement.on
    if v.estimate is None:
        return [v.label, "-", "-"] + (["-", "-"] if measured else []) \
            + ["-", "build failed: " + v.result.error.splitlines()[0]]
    t = v.estimate.terms()
    body = max(("dram", "compute", "issue"), key=lambda k: t[k])
    verdict = {True: "verified", False: "FAILED verification", None: "not verified"}[v.verified]
    if v.result.original:
        verdict = "reference"
    same = _same_as(result, v)
    mark = " (chosen)" if v is result.chosen else ""
    cells = [v.label + mark, f"{len(v.result.counts)}", fmt_time(v.seconds)]
    if measured:
        m = v.measured
        cells += [f"{fmt_time(m.median_s)} [{fmt_time(m.p10_s)}, {fmt_time(m.p90_s)}]"
                  if m else (v.measure_note or "not measured"),
                  _error(v.seconds, m.median_s) if m else "-"]
    return cells + [f"launch {fmt_time(t['launch'])}; bodies {fmt_time(v.seconds - t['launch'])}"
                    f" (mostly {body})", verdict + (f"; same program as {same}" if same else "")]


def _head(result: TuneResult) -> list[str]:
    return ["variant", "launches run", "estimated time (estimate)"] \
        + (["measured time (median [p10, p90])", "model error"]
           if result.measurement.on else []) + ["terms (estimate)", "verification"]


def _error(estimate: float, measured: float) -> str:
    """The model's relative error, signed: + when it estimates more than was measured."""
    if not measured or math.isinf(estimate):
        return "-"
    return f"{(estimate - measured) / measured:+.0%}"


def _kernel_table(v: Variant) -> tuple[list[str], list[list[str]]]:
    """Per kernel: estimate, bound and explanation, and with a measurement, the measured
    time and the model's error."""
    errs = {k.kernel: k for k in kernel_errors(v.estimate, v.measured)} if v.measured else {}
    head = ["kernel", "launches", "estimated time"] \
        + (["measured time", "model error"] if errs else []) + ["bound", "explanation"]
    rows = []
    for k in v.estimate.kernels:
        extra = [fmt_time(errs[k.kernel].measured_s),
                 _error(k.seconds, errs[k.kernel].measured_s)] if errs else []
        rows.append([k.kernel, str(k.launches), fmt_time(k.seconds)] + extra
                    + [TERM_NAMES[k.bound], k.explain])
    return head, rows


def _chosen_line(result: TuneResult, sp: dict) -> str:
    c, b, g = result.chosen, result.baseline, result.gpu
    line = f"**Chosen: {c.label}** (by {result.chosen_by}), "
    if c.measured is not None and "measured_over_original" in sp:
        line += (f"measured {fmt_time(c.measured.median_s)} on "
                 f"{result.measurement.device['name']} vs {fmt_time(b.measured.median_s)} for "
                 f"the original ({sp['measured_over_original']:.2f}x, measured"
                 + (f"; {sp['measured_over_default_fuse']:.2f}x over `sirius fuse` defaults"
                    if "measured_over_default_fuse" in sp else "") + "); ")
    return (line + f"estimated {fmt_time(c.seconds)} on {g.name} vs {fmt_time(b.seconds)} for "
            f"the original ({sp['over_original']:.2f}x, estimate"
            + (f"; {sp['over_default_fuse']:.2f}x over `sirius fuse` defaults"
               if "over_default_fuse" in sp else "")
            + f"); verified on the CPU executor: {c.verify_note}." + _prepare_note(c, b))


def _prepare_note(c, b) -> str:
    """What of the estimates is the one-time prepare part (docs/fusion.md#prepare)."""
    if c.estimate is None or b.estimate is None or not b.estimate.prepare_seconds:
        return ""
    cp, bp = c.estimate.prepare_seconds, b.estimate.prepare_seconds
    return (f" Of these, the one-time prepare part (launches that compute only from the "
            f"parameters) is {fmt_time(cp)} and {fmt_time(bp)}; per inference "
            f"{fmt_time(c.seconds - cp)} vs {fmt_time(b.seconds - bp)} (estimate).")


def _measure_line(result: TuneResult) -> str:
    m = result.measurement
    if not m.on:
        return f"GPU measurement: none ({m.why})"
    return f"GPU measurement: {m.device['name']} ({m.device['arch']}): {m.method}"


def calibration_tables(cal) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, head, rows) of the constants before and after and of the fit's residuals."""
    names = {"launch_us": "launch overhead (us)", "dram_gbps": "DRAM bandwidth (GB/s)",
             "issue_rate_factor": "issue-rate factor",
             "grid_sync_us": "megakernel grid barrier (us)",
             "wait_us": "megakernel dependence wait (us)"}
    consts = [[names[k], f"{getattr(cal.before, k):.4g}", f"{getattr(cal.after, k):.4g}",
               "fitted" if k in cal.fitted else f"not fitted: {cal.not_fitted[k]}"]
              for k in names]
    res = [[r.label, str(r.launches), fmt_time(r.measured), fmt_time(r.before),
            f"{r.error_before:+.1%}", fmt_time(r.after), f"{r.error_after:+.1%}"]
           for r in cal.residuals[:MAX_LAUNCHES]]
    return [(f"Constants of {cal.gpu} (before: the GPU table and the model's assumptions)",
             ["constant", "before", "after", ""], consts),
            (f"Residuals: {len(cal.residuals)} measurements, RMS relative error "
             f"{cal.rms('before'):.1%} before, {cal.rms('after'):.1%} after"
             + (" (the first 200 shown)" if len(cal.residuals) > MAX_LAUNCHES else ""),
             ["measurement", "launches", "measured", "estimate before", "error",
              "estimate after", "error"], res)]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return out


def report_md(result: TuneResult) -> str:
    g = result.gpu
    files = ", ".join(result.source.files)
    lines = [f"# sirius tune: {files}", "", f"> {time_note(result)}", ""]
    sp = speedups(result)
    if result.chosen is not None:
        lines += [_chosen_line(result, sp), ""]
    else:
        lines += ["**No variant was chosen**: none could be built and verified.", ""]
    launch = "calibrated" if result.calibration else "an assumption"
    lines += [f"- GPU: {g.name} ({g.arch}; {g.sms} SMs, {g.boost_mhz:g} MHz, "
              f"{g.dram_gbps:.4g} GB/s, {g.fp32_tflops} TFLOP/s FP32, launch "
              f"{g.launch_us:.3g} us: {launch}); program assembled for {result.source.arch}",
              f"- model assumptions: {json.dumps(result.assumptions.to_json())}",
              f"- {_measure_line(result)}",
              f"- variants built and verified: {result.ran_on}"
              + (f" (not on Ray: {result.fanout['why_not_ray']})"
                 if result.fanout.get("why_not_ray") else "") + "; "
              + ", ".join(f"{k} {x:.1f} s" for k, x in result.seconds.items()), ""]
    lines += ["## Variants" + (" (estimates and measurements)" if result.measurement.on
                               else " (estimates)"), ""]
    lines += _table(_head(result), [_row(result, v) for v in [result.baseline]
                                    + result.variants])
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
        head, rows = _kernel_table(v)
        lines += ["", f"## {title}: why each kernel takes its time (estimates"
                  + (", measured next to them" if len(head) > 5 else "") + ")", "",
                  f"Bound: {bound_line(v.estimate)}.", ""]
        lines += _table(head, rows)
    if result.calibration is not None:
        lines += ["", f"## Calibration ({result.calibration.path})"]
        for title, head, rows in calibration_tables(result.calibration):
            lines += ["", f"{title}:", ""] + _table(head, rows)
        lines += [f"- {n}" for n in result.calibration.notes]
    if result.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in result.notes]
    lines += ["", "## Where the GPU's numbers come from", ""]
    lines += [f"- {k}: {s}" for k, s in g.sources]
    return "\n".join(lines) + "\n"


# html ---------------------------------------------------------------------------------------------
_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;font-size:13px;margin:.5em 0;display:block;
max-width:100%;overflow-x:auto}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;
vertical-align:top;overflow-wrap:anywhere}th{background:#f2f4f7}.note{background:#fff6d6;
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
             f"<p class='note'>{e(time_note(result))}</p>"]
    sp = speedups(result)
    if result.chosen is not None:
        parts.append(f"<p>{_inline_html(_chosen_line(result, sp))}</p>")
    parts.append(f"<p>{e(_measure_line(result))}.</p>")
    bounds = [(t, v) for t, v in (("original", result.baseline), ("chosen", result.chosen))
              if v is not None and v.estimate is not None]
    if bounds:
        parts.append("<p>What bounds it (estimate): " + "; ".join(
            f"<b>{t}</b>: {e(bound_line(v.estimate))}" for t, v in bounds) + ".</p>")
    else:
        parts.append("<p><b>No variant was chosen</b>: none could be built and verified.</p>")
    parts.append(_plot(plots.variant_times, result, "estimated and measured time per variant"
                       if result.measurement.on else "estimated time per variant"))
    parts.append("<h2>Variants" + (" (estimates and measurements)" if result.measurement.on
                                   else " (estimates)") + "</h2>"
                 + _html_table(_head(result), [_row(result, v) for v in [result.baseline]
                                               + result.variants],
                               [v is result.chosen for v in [result.baseline]
                                + result.variants]))
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
        head, rows = _kernel_table(v)
        parts.append(f"<h2>{e(title)}: why each kernel takes its time (estimates"
                     + (", measured next to them" if len(head) > 5 else "") + ")</h2>"
                     f"<p>Bound: {e(bound_line(v.estimate))}.</p>" + _html_table(head, rows))
    if result.calibration is not None:
        parts.append(f"<h2>Calibration ({e(result.calibration.path)})</h2>")
        for title, head, rows in calibration_tables(result.calibration):
            parts.append(f"<p>{e(title)}:</p>" + _html_table(head, rows))
        parts += [f"<p>{e(n)}</p>" for n in result.calibration.notes]
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


def _html_table(head: list[str], rows: list[list[str]],
                chosen: list[bool] | None = None) -> str:
    e = html.escape
    body = "".join(
        f"<tr class='{'chosen' if chosen and chosen[i] else ''}'>"
        + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for i, r in enumerate(rows))
    return ("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
            + body + "</table>")


def _inline_html(md: str) -> str:
    """A line of report.md's markdown (**bold**, `code`) as HTML."""
    out = html.escape(md)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def uar_picture(result: TuneResult):
    """The UAR picture (uarplot.Picture) of the chosen variant's plan, None without a UAR."""
    from sirius.tune.uarplot import picture

    if result.uar is None:
        return None
    fused = result.chosen.result.fused if result.chosen is not None else ()
    return picture(result.uar, fused)


def runs_of(result: TuneResult) -> dict:
    """The measurements of this run as a RUNS.json (`--calibrate`): each measured launch of
    every distinct measured program with its counts."""
    from sirius.tune.calibrate import runs_json

    vs = [(v.label, v.estimate.counts, v.measured) for v in [result.baseline] + result.variants
          if v.measured is not None and v.estimate is not None
          and not v.measure_note.startswith("the same program")]
    m = result.measurement
    return runs_json(result.gpu, m.device["name"] if m.device else "", m.method, vs)


def write_outputs(result: TuneResult, out: Path) -> list[Path]:
    """tune.json, report.md, report.html, runs.json when measured, and chosen/ (fused.ll,
    fused.ptx, plan.json, report.md) in `out` (created)."""

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    pic = uar_picture(result)
    files = [("tune.json", json.dumps(tune_json(result), indent=1) + "\n"),
             ("report.md", report_md(result)), ("report.html", report_html(result, pic))]
    if pic is not None and pic.dot:
        files.append(("uar.dot", pic.dot))
    if result.measurement.on:
        files.append(("runs.json", json.dumps(runs_of(result), indent=1) + "\n"))
    for name, text in files:
        p = out / name
        p.write_text(text)
        paths.append(p)
    if result.chosen_files is not None:  # the module verified (verifying.fused_files)
        (out / "chosen").mkdir(parents=True, exist_ok=True)
        for name, text in result.chosen_files.items():
            p = out / "chosen" / name
            p.write_text(text)
            paths.append(p)
    return paths
