"""The report's charts, drawn with matplotlib (Agg backend) from a ``ReportContext``.

Each chart is rendered twice from the same figure: SVG text for the HTML (inline, so the
report is one self-contained file) and PNG bytes for the PDF. Output is deterministic: a fixed
``svg.hashsalt``, no creation date or software stamp in the metadata, fixed sizes and fonts.
Money is converted to float here only to place bars on an axis; every number printed in the
report comes from the exact Decimals, not from these charts. Amounts of different currencies
are never drawn on one axis: the gap chart has one panel per currency (at most
``GAP_PANELS``; every currency is in gap_by_window.csv).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from reports.context import GapPoint, ReportContext, WatermarkPoint

__all__ = ["CHART_NAMES", "GAP_PANELS", "Chart", "render_charts"]

GAP_PANELS = 6  # currencies drawn in the gap chart, those with the most unexplained rows first

_STYLE: dict[str, Any] = {
    "svg.hashsalt": "reckon-report",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
}
_BLUE, _ORANGE, _RED, _GREEN, _GREY = "#2f6690", "#d9822b", "#c0392b", "#3a7d44", "#777777"


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    svg: str
    png: bytes


def _gap_currencies(pts: tuple[GapPoint, ...]) -> list[str]:
    """The currencies to draw: all of them up to GAP_PANELS, else those with the most
    unexplained rows (then the most windows), shown in code order."""
    weight: dict[str, tuple[int, int]] = {}
    for p in pts:
        u, n = weight.get(p.currency, (0, 0))
        weight[p.currency] = (u + p.unexplained, n + p.windows)
    ranked = sorted(weight, key=lambda code: (-weight[code][0], -weight[code][1], code))
    return sorted(ranked[:GAP_PANELS])


def _gap_panel(ctx: ReportContext, ax: Any, code: str, pts: list[GapPoint]) -> None:
    """One currency's gap, late and residual per bucket, on an axis of its own."""
    half = timedelta(seconds=max(ctx.gap_bucket_seconds, 1) / 2)
    x: Any = [p.bucket_start + half for p in pts]  # each bucket drawn at its middle
    width = max(ctx.gap_bucket_seconds, 1) / 86_400 * 0.8
    ax.bar(x, [float(p.late_amount) for p in pts], width=width, color=_ORANGE,
           label="explained by late events")
    ax.plot(x, [float(p.gap_amount) for p in pts], color=_BLUE, marker="o", markersize=3,
            linewidth=1.2, label="gap (canonical - provisional)")
    ax.plot(x, [float(p.residual_amount) for p in pts], color=_RED, linewidth=1.2,
            linestyle="--", label="unexplained residual")
    ax.axhline(0, color=_GREY, linewidth=0.8)
    ax.set_ylabel(f"amount ({code})")
    ax.set_title(code, loc="left", fontsize=9, fontweight="bold")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))


def _gap(ctx: ReportContext, fig: Figure) -> bool:
    pts = ctx.gap_series
    if not pts:
        return False
    codes = _gap_currencies(pts)
    fig.set_size_inches(9, 1.2 + 2.2 * len(codes))
    axes = fig.subplots(len(codes), 1, sharex=True, squeeze=False)[:, 0]
    for ax, code in zip(axes, codes, strict=True):
        _gap_panel(ctx, ax, code, [p for p in pts if p.currency == code])
    axes[0].legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel(f"window start (UTC), buckets of {ctx.gap_bucket_seconds} s")
    shown = len({p.currency for p in pts})
    if shown > len(codes):
        fig.suptitle(f"{len(codes)} of {shown} currencies (most unexplained rows); every "
                     "currency is in gap_by_window.csv", fontsize=9)
    return True


def _histogram(ctx: ReportContext, fig: Figure) -> bool:
    buckets = ctx.lateness_histogram
    if not buckets or not any(b.events or b.late_events for b in buckets):
        return False
    ax = fig.add_subplot()
    idx = list(range(len(buckets)))
    ax.bar([i - 0.2 for i in idx], [b.events for b in buckets], width=0.4, color=_BLUE,
           label="events by arrival delay")
    ax.bar([i + 0.2 for i in idx], [b.late_events for b in buckets], width=0.4, color=_RED,
           label="late events by time past close")
    ax.set_xticks(idx, [b.label for b in buckets])
    if max(b.events for b in buckets) > 50 * max(1, min(b.events for b in buckets if b.events)):
        ax.set_yscale("symlog", linthresh=1)
    ax.set_ylabel("events")
    ax.set_xlabel("seconds")
    ax.legend(loc="upper right", fontsize=8)
    return True


def _curve(ctx: ReportContext, fig: Figure) -> bool:
    pts = ctx.lateness_curve or ctx.lateness_curve_batches
    if not pts:
        return False
    ax = fig.add_subplot()
    xs = [float(p.bound_seconds) for p in pts]
    batches = ctx.lateness_curve_batches
    if batches:
        ax.plot([float(p.bound_seconds) for p in batches], [p.completeness for p in batches],
                color=_GREEN, marker="s", markersize=4,
                label="completeness per micro-batch, as the stream ran")
    if ctx.lateness_curve:
        ax.plot([float(p.bound_seconds) for p in ctx.lateness_curve],
                [p.completeness for p in ctx.lateness_curve], color=_BLUE, marker="o",
                markersize=4, label="completeness per event, as if every event moved the WM")
    if ctx.target_completeness is not None:
        ax.axhline(float(ctx.target_completeness), color=_GREY, linestyle=":",
                   label=f"target {ctx.target_completeness}")
    if ctx.configured_bound_seconds is not None:
        ax.axvline(float(ctx.configured_bound_seconds), color=_ORANGE, linestyle="--",
                   label=f"configured L = {ctx.configured_bound_seconds} s")
    if ctx.recommended_bound_seconds is not None:
        ax.axvline(float(ctx.recommended_bound_seconds), color=_GREEN, linestyle="-.",
                   label=f"recommended L = {ctx.recommended_bound_seconds} s")
    positive = [x for x in xs if x > 0]
    if positive and min(xs) >= 0 and max(xs) > 20 * min(positive):
        # wide ladders (0s .. 5m): log-like spacing, ticks at the candidate bounds themselves
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(left=-0.2, right=max(xs) * 1.15)
        ax.set_xticks(xs, [f"{p.bound_seconds}" for p in pts])
        ax.minorticks_off()
    ax.set_xlabel("watermark bound L (seconds)")
    ax.set_ylabel("share of events counted")
    ax.legend(loc="lower right", fontsize=8)
    return True


def watermark_lags(points: Sequence[WatermarkPoint]
                   ) -> tuple[dict[int, list[tuple[int, float, bool]]], dict[int, int]]:
    """Per partition: (batch, seconds its own watermark is ahead of the global one, idle) for
    every batch with a global watermark; and how many batches each partition held the global
    watermark back (the active partition at lag 0, the min rule's minimum)."""
    glob = {p.batch_id: p.watermark for p in points
            if p.partition is None and p.watermark is not None}
    lags: dict[int, list[tuple[int, float, bool]]] = {}
    for p in points:
        if p.partition is not None and p.watermark is not None and p.batch_id in glob:
            ahead = (p.watermark - glob[p.batch_id]).total_seconds()
            lags.setdefault(p.partition, []).append((p.batch_id, ahead, p.idle))
    held: dict[int, int] = {}
    for batch in glob:
        active = [(lag, part) for part, rows in lags.items()
                  for b, lag, idle in rows if b == batch and not idle]
        if active:
            holder = min(active)[1]
            held[holder] = held.get(holder, 0) + 1
    return lags, held


def _watermarks(ctx: ReportContext, fig: Figure) -> bool:
    """Each partition's watermark ahead of the global watermark, in seconds: the partition on
    the zero line holds the global watermark back; an idle partition (left out of the min
    rule) is drawn hollow, and may fall below zero."""
    lags, held = watermark_lags(ctx.watermark_series)
    if not lags:
        return False
    shown = len({p.batch_id for p in ctx.watermark_series if p.partition is None})
    ax = fig.add_subplot()
    for part in sorted(lags):
        rows = lags[part]
        share = held.get(part, 0)
        line = ax.plot([b for b, _l, _i in rows], [lag for _b, lag, _i in rows],
                       linewidth=1.8, alpha=0.85,
                       label=f"partition {part} (held it back in {share} of the "
                             f"{shown} batches drawn)")[0]
        idle = [(b, lag) for b, lag, i in rows if i]
        if idle:
            ax.scatter([b for b, _l in idle], [lag for _b, lag in idle], s=22,
                       facecolors="white", edgecolors=line.get_color(), zorder=3,
                       label=f"partition {part} idle")
    ax.axhline(0, color="black", linewidth=1, linestyle="--", label="global watermark")
    ax.set_xlabel("micro-batch")
    ax.set_ylabel("ahead of the global watermark (s)")
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    return True


_CHARTS: tuple[tuple[str, str, Callable[[ReportContext, Figure], bool]], ...] = (
    ("gap_by_window", "Gap over the day", _gap),
    ("lateness_histogram", "Lateness distribution", _histogram),
    ("lateness_curve", "Bound what-if: completeness by bound", _curve),
    ("watermark_progress", "Watermark: each partition against the global watermark",
     _watermarks),
)


CHART_NAMES = tuple(name for name, _, _ in _CHARTS)


def render_charts(ctx: ReportContext) -> tuple[Chart, ...]:
    """The charts that have data, in report order."""
    out: list[Chart] = []
    with plt.rc_context(_STYLE):  # type: ignore[arg-type]
        for name, title, draw in _CHARTS:
            fig = Figure(figsize=(9, 3.4))
            try:
                if not draw(ctx, fig):
                    continue
                fig.tight_layout()
                svg, png = io.StringIO(), io.BytesIO()
                fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
                fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
            finally:
                fig.clear()
            text = svg.getvalue()
            text = text[text.index("<svg"):]  # drop the XML prolog and doctype: inline use
            out.append(Chart(name, title, text, png.getvalue()))
    return tuple(out)
