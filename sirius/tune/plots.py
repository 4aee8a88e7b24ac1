"""The report's plots (matplotlib, Agg backend), each returned as PNG bytes:

- `variant_times`: estimated time per variant, split into launch overhead and kernel body,
  and beside it the measured median (p10-p90) of each variant timed on a GPU;
- `roofline`: each kernel's estimated FLOP/s against its arithmetic intensity (FLOPs per DRAM
  byte charged), original and chosen program, under the GPU's FP32 and DRAM roofs;
- `before_after`: launches, instructions and DRAM bytes of the original and the chosen program.

All numbers but the measured times come from the cost model: the plots say "estimate" in
their titles, and every estimated bar says "estimate" in its label.
"""

from __future__ import annotations

import io

from sirius.diagnostics import SiriusError


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise SiriusError("matplotlib is not installed: pip install 'sirius[tune]'") \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def variant_times(result) -> bytes:
    return _png(variant_times_figure(result))


def variant_times_figure(result):
    """Estimated time per variant (launch overhead and kernel bodies, stacked), and where a
    variant was timed on a GPU its measured median beside it (p10-p90 as a whisker)."""
    plt = _plt()
    rows = [result.baseline] + [v for v in result.variants if v.estimate is not None]
    labels = [("* " if v is result.chosen else "") + v.label for v in rows]
    launch = [v.estimate.terms()["launch"] * 1e6 for v in rows]
    body = [(v.estimate.seconds - v.estimate.terms()["launch"]) * 1e6 for v in rows]
    measured = [v.measured for v in rows]
    both = any(m is not None for m in measured)
    height = (0.7 if both else 0.45) * len(rows) + 1.2
    fig, ax = plt.subplots(figsize=(7.5, height))
    h = 0.38 if both else 0.8
    ye = [i - h / 2 if both else i for i in range(len(rows))]  # the estimates' bars
    ax.barh(ye, launch, height=h, color="#9aa5b1", label="launch overhead (estimate)")
    ax.barh(ye, body, height=h, left=launch, color="#3b7dd8",
            label="kernel bodies (estimate: max of DRAM, FLOPs, issue)")
    for i, v in enumerate(rows):
        ax.text(launch[i] + body[i], ye[i], f" {v.seconds * 1e6:.3g} us estimate", va="center",
                fontsize=7 if both else 8)
    right = max(a + b for a, b in zip(launch, body, strict=True))
    if both:
        ym = [i + h / 2 for i, m in enumerate(measured) if m is not None]
        ms = [m for m in measured if m is not None]
        med = [m.median_s * 1e6 for m in ms]
        err = [[(m.median_s - m.p10_s) * 1e6 for m in ms], [(m.p90_s - m.median_s) * 1e6
                                                            for m in ms]]
        ax.barh(ym, med, height=h, color="#d8573b", xerr=err, capsize=2,
                error_kw={"elinewidth": 0.8}, label="measured on the GPU (median, p10-p90)")
        for y, m in zip(ym, ms, strict=True):
            ax.text(m.p90_s * 1e6, y, f" {m.median_s * 1e6:.3g} us measured", va="center",
                    fontsize=7)
        for i, m in enumerate(measured):
            if m is None:
                ax.text(0, i + h / 2, " not measured", va="center", fontsize=7,
                        color="#666666")
        right = max(right, max(m.p90_s * 1e6 for m in ms))
    ax.set_yticks(list(range(len(rows))), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("estimated and measured time (us)" if both else "estimated time (us)")
    title = (f"Estimated time per variant on {result.gpu.name} (estimate) beside the time "
             "measured on the GPU; * chosen" if both else
             f"Estimated time per variant on {result.gpu.name} (estimate; * chosen)")
    ax.set_title(title, fontsize=9)
    ax.set_xlim(0, right * (1.32 if both else 1.18))
    # below the x label: about 0.6 inch under the axes, whatever the figure's height
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.6 / (0.77 * height)),
              ncol=3 if both else 2)
    return fig


def roofline(result) -> bytes:
    plt = _plt()
    g = result.gpu
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    peak, bw = g.fp32_tflops * 1e12, g.dram_bytes_per_s
    xs = sorted([2.0 ** k for k in range(-8, 11)] + [peak / bw])
    ax.plot(xs, [min(peak, x * bw) for x in xs], color="black", lw=1,
            label=f"roofs: FP32 {g.fp32_tflops} TFLOP/s, DRAM {g.dram_gbps:g} GB/s")
    skipped = 0
    series = [("original", result.baseline, "o", "#9aa5b1")]
    if result.chosen is not None:
        series.append((f"chosen ({result.chosen.label})", result.chosen, "^", "#d8573b"))
    for name, v, marker, color in series:
        pts = [(k.flops / k.dram_bytes_charged, k.flops / k.seconds, k.kernel)
               for k in v.estimate.kernels
               if k.flops and k.dram_bytes_charged and k.seconds > 0]
        skipped += len(v.estimate.kernels) - len(pts)
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color,
                       label=name, zorder=3)
            for x, yv, k in pts[:12]:
                ax.annotate(k[:18], (x, yv), fontsize=6, xytext=(3, 3),
                            textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per DRAM byte charged)")
    ax.set_ylabel("estimated FLOP/s (launch overhead included)")
    extra = f"; {skipped} kernel(s) without FLOPs not shown" if skipped else ""
    ax.set_title(f"Per-kernel roofline position, before and after fusion (estimate{extra})",
                 fontsize=9)
    ax.legend(fontsize=7)
    return _png(fig)


def before_after(result) -> bytes:
    plt = _plt()
    rows = [("original", result.baseline)]
    if result.chosen is not None:
        rows.append((f"chosen: {result.chosen.label}", result.chosen))
    fig, axes = plt.subplots(1, 3, figsize=(9, 3))
    metrics = [("launches", lambda v: len(v.estimate.launches), 1, ""),
               ("instructions (LLVM IR, executor)",
                lambda v: sum(c.instructions for c in v.result.counts), 1e6, "M"),
               ("DRAM bytes charged", lambda v: sum(e.dram_bytes for e in v.estimate.launches),
                1e6, "MB")]
    for ax, (title, f, scale, unit) in zip(axes, metrics, strict=True):
        vals = [f(v) / scale for _, v in rows]
        ax.bar(range(len(rows)), vals, color=["#9aa5b1", "#d8573b"][:len(rows)])
        ax.set_xticks(range(len(rows)), [n for n, _ in rows], fontsize=7, rotation=10)
        ax.set_title(title + (f" ({unit})" if unit else ""), fontsize=8)
        for i, val in enumerate(vals):
            ax.text(i, val, f"{val:.3g}", ha="center", va="bottom", fontsize=7)
    fig.suptitle("Before and after fusion (executor counts; DRAM bytes as the model charges "
                 "them: estimate)", fontsize=9)
    return _png(fig)
