"""The report's plots (matplotlib, Agg backend), each returned as PNG bytes:

- `variant_times`: estimated time per variant, split into launch overhead and kernel body;
- `roofline`: each kernel's estimated FLOP/s against its arithmetic intensity (FLOPs per DRAM
  byte charged), original and chosen program, under the GPU's FP32 and DRAM roofs;
- `before_after`: launches, instructions and DRAM bytes of the original and the chosen program.

All numbers come from the cost model: the plots say "estimate" in their titles.
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
    plt = _plt()
    rows = [result.baseline] + [v for v in result.variants if v.estimate is not None]
    labels = [("* " if v is result.chosen else "") + v.label for v in rows]
    launch = [v.estimate.terms()["launch"] * 1e6 for v in rows]
    body = [(v.estimate.seconds - v.estimate.terms()["launch"]) * 1e6 for v in rows]
    height = 0.45 * len(rows) + 1.2
    fig, ax = plt.subplots(figsize=(7.5, height))
    y = range(len(rows))
    ax.barh(y, launch, color="#9aa5b1", label="launch overhead")
    ax.barh(y, body, left=launch, color="#3b7dd8", label="kernel bodies (max of DRAM, FLOPs, "
            "issue)")
    for i, v in enumerate(rows):
        ax.text(launch[i] + body[i], i, f" {v.seconds * 1e6:.3g} us", va="center", fontsize=8)
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("estimated time (us)")
    ax.set_title(f"Estimated time per variant on {result.gpu.name} (estimate; * chosen)",
                 fontsize=9)
    ax.set_xlim(0, max(a + b for a, b in zip(launch, body, strict=True)) * 1.18)
    # below the x label: about 0.6 inch under the axes, whatever the figure's height
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.6 / (0.77 * height)),
              ncol=2)
    return _png(fig)


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
