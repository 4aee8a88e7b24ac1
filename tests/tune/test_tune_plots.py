"""The variant-time plot: estimated bars (labelled "estimate") and, for variants timed on a
GPU, the measured median beside them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sirius.tune import plots
from sirius.tune.measure import Measured

pytest.importorskip("matplotlib")


def _variant(label: str, launch_us: float, body_us: float, measured_us: float | None):
    est = SimpleNamespace(seconds=(launch_us + body_us) * 1e-6,
                          terms=lambda: {"launch": launch_us * 1e-6})
    m = None if measured_us is None else Measured(
        measured_us * 1e-6, 0.9 * measured_us * 1e-6, 1.2 * measured_us * 1e-6, 3, "", "Fake")
    return SimpleNamespace(label=label, estimate=est, seconds=est.seconds, measured=m)


def _result(measured: bool):
    base = _variant("original", 12, 12, 24 if measured else None)
    auto = _variant("auto", 3, 2, 105 if measured else None)
    horiz = _variant("horizontal", 12, 12, None)  # not timed: its estimate alone
    return SimpleNamespace(baseline=base, variants=[auto, horiz], chosen=auto,
                           gpu=SimpleNamespace(name="H100 SXM"))


def _bars(ax) -> dict[str, list[float]]:
    """legend label -> the widths of that series' bars."""
    return {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers
            if hasattr(c, "patches")}


def test_measured_times_are_plotted_beside_the_estimates():
    fig = plots.variant_times_figure(_result(measured=True))
    (ax,) = fig.axes
    bars = _bars(ax)
    assert bars["launch overhead (estimate)"] == pytest.approx([12, 3, 12])
    assert bars["kernel bodies (estimate: max of DRAM, FLOPs, issue)"] == pytest.approx(
        [12, 2, 12])
    assert bars["measured on the GPU (median, p10-p90)"] == pytest.approx([24, 105])
    texts = [t.get_text() for t in ax.texts]
    assert " 105 us measured" in texts and " 5 us estimate" in texts
    assert texts.count(" not measured") == 1  # horizontal
    assert "(estimate) beside the time measured on the GPU" in ax.get_title()
    assert plots._png(fig).startswith(b"\x89PNG")


def test_without_measurements_only_the_estimates():
    fig = plots.variant_times_figure(_result(measured=False))
    (ax,) = fig.axes
    assert set(_bars(ax)) == {"launch overhead (estimate)",
                              "kernel bodies (estimate: max of DRAM, FLOPs, issue)"}
    assert "(estimate; * chosen)" in ax.get_title()
    plots._plt().close(fig)
