"""The report page's drawing helpers: escaping, number formats, SVG frames, axes and ticks (inline SVG only)."""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor.offline.report_data import ReportData

VERDICT_COLOURS = {"stable": "#4caf50", "input-shift": "#ffb300", "harmful-shift": "#d32f2f"}
PLOT_W, PLOT_H = 760, 220
PAD_L, PAD_R, PAD_T, PAD_B = 70, 20, 20, 36


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def attr_num(v: float) -> str:
    """A value for a ``data-*`` attribute: exact (repr), 'nan' for NaN."""
    return repr(float(v))


def short_num(v: float, digits: int = 3) -> str:
    return "–" if not math.isfinite(v) else f"{v:.{digits}g}"


def svg_open(width: int, height: int, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11" role="img" aria-label="{esc(label)}">'
        f'<rect width="{width}" height="{height}" fill="white"/>'
    )


def x_axis(
    out: list[str], lo: float, hi: float, y: float, label: str, fmt: Callable[[float], str] | None = None
) -> None:
    out.append(f'<line x1="{PAD_L}" y1="{y}" x2="{PLOT_W - PAD_R}" y2="{y}" stroke="#888"/>')
    for t in nice_ticks(lo, hi):
        x = PAD_L + (t - lo) / (hi - lo or 1.0) * (PLOT_W - PAD_L - PAD_R)
        text = short_num(t, 4) if fmt is None else fmt(t)
        out.append(f'<text x="{x:.1f}" y="{y + 13}" text-anchor="middle" font-size="10">{esc(text)}</text>')
    out.append(f'<text x="{(PAD_L + PLOT_W - PAD_R) / 2:.0f}" y="{y + 28}" text-anchor="middle">{esc(label)}</text>')


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step) + 1)]


def utc_text(seconds: float, pattern: str = "%Y-%m-%d %H:%M:%S") -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime(pattern)


def time_axis(start: float, end: float) -> tuple[str, Callable[[float], str]]:
    """The x axis label and tick format of an event-time axis whose x is seconds after ``start``: offsets in
    seconds under an hour, else the UTC clock (with the day over a day)."""
    span = end - start
    if span < 3600:
        return f"event time: seconds after {utc_text(start)} UTC", lambda t: f"+{short_num(t, 4)} s"
    pattern = "%H:%M" if span < 86400 else "%m-%d %H:%M"
    return f"event time (UTC, from {utc_text(start)})", lambda t: utc_text(start + t, pattern)


def time_range(data: ReportData) -> tuple[float, float] | None:
    """The page's one event-time axis: from the first to the last event time that any time-drawn section holds
    (verdict spans, signal bins, periods), or None where the events carry no times."""
    if data.axis != "time":
        return None
    ts = [t for s in data.spans for t in (s.t_start, s.t_end) if math.isfinite(t)]
    ts += [float(v) for s in data.signals if s.time is not None for v in s.time]
    ts += [t for p in data.periods for t in (p.start, p.end)]
    if not ts:
        return None
    return min(ts), max(max(ts), min(ts) + 1e-9)
