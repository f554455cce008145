"""The report page's summary, per-input section and per-period estimate, drawn from
:class:`~monitor.offline.report_data.ReportData` alone (inline SVG, as :mod:`monitor.offline.report_page`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from monitor.offline import report_svg as svg
from monitor.offline.report_inputs import DRIFT_ALPHA
from monitor.offline.report_paired import summary_line

if TYPE_CHECKING:
    from monitor.offline.report_data import InputDrift, PeriodEstimate, ReportData

#: inputs drawn with their two distributions (the rest are counted, and listed in the table up to TABLE_INPUTS)
CHART_INPUTS = 12
TABLE_INPUTS = 50
#: inputs in the effect bar chart
BAR_INPUTS = 30
_SEVERITY = {"stable": 0, "input-shift": 1, "harmful-shift": 2}
_SW, _SH = 370, 150


def effect_name(d: InputDrift) -> str:
    """What the effect size of ``d`` is: the KS distance D of a number, the total variation distance of a
    category (its test is chi-square)."""
    return "KS D" if d.kind == "numeric" else "TV"


def by_effect(drift: Sequence[InputDrift]) -> list[InputDrift]:
    """Moved inputs first, then by effect size (NaN last), then by name."""
    return sorted(drift, key=lambda d: (not d.moved, -(d.statistic if math.isfinite(d.statistic) else -1.0), d.name))


# ------------------------------------------------------------------------------------------------------------ summary


def summary(data: ReportData) -> str:
    """The answer first: each segment's verdict, what moved, the estimated performance, what to do, and what the
    page could not draw."""
    items = [_verdict_line(data), _moved_line(data), _performance_line(data), summary_line(data), _todo_line(data)]
    missing = [
        n
        for n in (data.timeline_note, data.drift_note, data.accuracy_note, data.periods_note, data.gamma_map_note)
        if n and n.startswith(("no ", "nothing"))
    ]
    if missing:
        items.append("<b>Not drawn</b>: " + "; ".join(svg.esc(n) for n in dict.fromkeys(missing)) + ".")
    return '<ul id="summary-list">' + "".join(f"<li>{i}</li>" for i in items if i) + "</ul>"


def _verdict_line(data: ReportData) -> str:
    if data.timeline is None:
        return f"<b>Verdict</b>: none ({svg.esc(data.timeline_note)})."
    parts = []
    for seg in dict.fromkeys(s.segment for s in data.spans):
        spans = [s for s in data.spans if s.segment == seg]
        worst = max(spans, key=lambda s: _SEVERITY.get(s.verdict, 0))
        last = spans[-1]
        text = f'{svg.esc(seg)}: <span class="v" style="background:{svg.VERDICT_COLOURS.get(last.verdict, "#999")}">'
        text += f"{svg.esc(last.verdict)}</span> at the end"
        if worst.verdict != last.verdict:
            text += f" (reached {svg.esc(worst.verdict)})"
        if worst.detectors:
            text += f", on {svg.esc(', '.join(worst.detectors))}"
        if worst.not_harm:
            text += f" ({svg.esc('; '.join(worst.not_harm))})"
        parts.append(text)
    return "<b>Verdict per segment</b>: " + ("; ".join(parts) or "stable") + "."


def _moved_line(data: ReportData) -> str:
    if not data.drift:
        return f"<b>What moved</b>: not tested ({svg.esc(data.drift_note)})." if data.drift_note else ""
    moved = [d for d in by_effect(data.drift) if d.moved]
    share = len(moved) / len(data.drift)
    head = f'<b>What moved</b>: <span id="drift-share">{len(moved)} of {len(data.drift)} inputs ({share:.0%})</span>'
    hidden = _hidden_line(data)
    if not moved:
        return head + " moved against the reference over every event." + hidden
    names = ", ".join(f"{svg.esc(d.name)} ({effect_name(d)} {svg.short_num(d.statistic, 2)})" for d in moved[:5])
    more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
    return f"{head} moved over every event: {names}{more}.{hidden}"


def _hidden_line(data: ReportData) -> str:
    """Where a segment's verdict named inputs: their figures in that segment, which the pooled ones can hide."""
    parts = []
    for sd in data.segment_drift:
        shown = ", ".join(
            f"{svg.esc(d.name)} {effect_name(d)} {svg.short_num(d.statistic, 2)} "
            f"({'moved' if d.moved else 'did not move'})"
            for d in sd.drift
        )
        parts.append(f"in segment {svg.esc(sd.segment)}, whose verdict names them: {shown}")
    if not parts:
        return ""
    return (
        " The figures over every event pool the segments and can hide one segment's move: "
        + "; ".join(parts)
        + " (the section Per-input drift lists them per segment)."
    )


def _performance_line(data: ReportData) -> str:
    acc = data.accuracy
    if acc is None:
        return ""
    text = (
        f"<b>Estimated accuracy</b>: {acc.estimate:.3f} [{acc.lower:.3f}, {acc.upper:.3f}] against "
        f"{acc.reference_accuracy:.3f} on the reference"
    )
    if acc.realized is not None:
        text += f"; realized {acc.realized:.3f} on {acc.n_labelled} labelled events"
    low = [p for p in data.periods if p.upper < acc.reference_accuracy]
    if low:
        text += f"; {len(low)} of {len(data.periods)} periods entirely below the reference accuracy"
    return text + "."


def _todo_line(data: ReportData) -> str:
    final = {s.segment: s.verdict for s in data.spans}
    moved = [d.name for d in by_effect(data.drift) if d.moved][:3]
    names = ", ".join(moved)
    if "harmful-shift" in final.values():
        todo = "performance is at risk: compare with labels where you have them, and retrain or roll back"
        todo += f"; start with the inputs that moved most ({svg.esc(names)})" if names else ""
    elif "input-shift" in final.values() and not names and any(s.not_harm for s in data.spans):
        todo = (
            "the model's answers grew less sure or more fragile with no evidence of lost performance (the summary's "
            "brackets say why): compare with labels when they arrive and watch the estimate per period"
        )
    elif "input-shift" in final.values():
        todo = "the inputs moved with no evidence of lost performance yet: check the upstream data"
        todo += f" of {svg.esc(names)}" if names else ""
        todo += " and watch the estimate per period"
    elif moved and data.timeline is not None:
        todo = (
            f"nothing urgent: the verdict stays stable although {svg.esc(names)} moved over the whole log — the verdict's "
            "detectors test windows of recent events against a minimum effect, and no window crossed; look at the "
            "distributions below if the move is expected"
        )
    else:
        todo = "nothing: no input moved and no detector fired" if data.timeline is not None else ""
    return f"<b>What to do</b>: {todo}." if todo else ""


# ------------------------------------------------------------------------------------------------------------ inputs


def inputs_section(data: ReportData) -> str:
    """The share of moved inputs, the effect per input, each input's two distributions (the
    ``CHART_INPUTS`` of largest effect), and the table."""
    if not data.drift:
        return f'<p class="empty">{svg.esc(data.drift_note or "no per-input drift")}</p>'
    ranked = by_effect(data.drift)
    n_moved = sum(d.moved for d in ranked)
    kinds = {k: sum(d.kind == k for d in ranked) for k in ("numeric", "categorical")}
    head = (
        f'<p id="drift-headline"><b>{n_moved} of {len(ranked)} inputs moved</b> ({n_moved / len(ranked):.0%}; '
        f"{kinds['numeric']} numeric by the KS test, {kinds['categorical']} categorical by chi-square with the total "
        f"variation distance as effect; Benjamini–Hochberg adjusted p &lt; {DRIFT_ALPHA} over the whole log).</p>"
    )
    if data.drift_note:
        head += f'<p class="empty">{svg.esc(data.drift_note)}</p>'
    shown = ranked[:CHART_INPUTS]
    charts = "".join(_distribution(d) for d in shown)
    more = ""
    if len(ranked) > CHART_INPUTS:
        more = (
            f'<p class="meta" id="inputs-more">Distributions of the {len(shown)} inputs of largest effect; '
            f"{len(ranked) - len(shown)} more inputs ({sum(d.moved for d in ranked[len(shown) :])} of them moved) are "
            f"in the table{' (its first ' + str(TABLE_INPUTS) + ')' if len(ranked) > TABLE_INPUTS else ''}.</p>"
        )
    return head + _bars(ranked) + f'<div class="grid">{charts}</div>' + more + _table(ranked) + _segment_table(data)


def _segment_table(data: ReportData) -> str:
    """The inputs each segment's verdict named, tested over that segment's events alone."""
    if not data.segment_drift:
        return ""
    rows = "".join(
        f'<tr data-segment="{svg.esc(sd.segment)}" data-name="{svg.esc(d.name)}" '
        f'data-value="{svg.attr_num(d.statistic)}" data-moved="{str(d.moved).lower()}">'
        f'<td class="l">{svg.esc(sd.segment)}</td><td class="l">{svg.esc(d.name)}</td><td>{sd.events}</td>'
        f"<td>{effect_name(d)} {svg.short_num(d.statistic, 3)}</td><td>{svg.short_num(d.p_value, 2)}</td>"
        f'<td class="l">{"moved" if d.moved else "did not move"}</td><td class="l">{sd.baseline}</td></tr>'
        for sd in data.segment_drift
        for d in sd.drift
    )
    return (
        '<p class="meta">The inputs a segment&#x27;s verdict named, over that segment&#x27;s events alone (the '
        "figures above pool every segment):</p>"
        '<table id="segment-drift"><tr><th class="l">segment</th><th class="l">input</th><th>events</th>'
        '<th>effect</th><th>adjusted p</th><th class="l">verdict</th><th class="l">baseline</th></tr>'
        f"{rows}</table>"
    )


def _bars(ranked: Sequence[InputDrift]) -> str:
    bar_h = 18
    shown = ranked[:BAR_INPUTS]
    height = svg.PAD_T + bar_h * len(shown) + svg.PAD_B
    left = 190
    top = max([d.statistic for d in shown if math.isfinite(d.statistic)] + [1e-9])
    scale = (svg.PLOT_W - left - svg.PAD_R - 60) / top
    out = [svg.svg_open(svg.PLOT_W, height, "effect per input")]
    for k, d in enumerate(shown):
        y = svg.PAD_T + k * bar_h
        w = max((d.statistic if math.isfinite(d.statistic) else 0.0) * scale, 1.0)
        out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{svg.esc(d.name)}</text>')
        out.append(
            f'<rect class="point" x="{left}" y="{y + 2}" width="{w:.1f}" height="{bar_h - 5}" '
            f'fill="{"#d32f2f" if d.moved else "#90a4ae"}" data-name="{svg.esc(d.name)}" data-kind="{d.kind}" '
            f'data-value="{svg.attr_num(d.statistic)}" data-p="{svg.attr_num(d.p_value)}" data-moved="{str(d.moved).lower()}">'
            f"<title>{svg.esc(d.name)}: {effect_name(d)} {svg.short_num(d.statistic)} ({d.test}), adjusted p {svg.short_num(d.p_value)}</title>"
            "</rect>"
        )
        out.append(
            f'<text x="{left + w + 4:.1f}" y="{y + 12}" font-size="10">{effect_name(d)} {svg.short_num(d.statistic, 2)}</text>'
        )
    more = f"; the {len(shown)} largest of {len(ranked)}" if len(ranked) > len(shown) else ""
    out.append(
        f'<text x="{left}" y="{height - 10}">effect: KS distance D (numbers), total variation distance (categories); '
        f"red: moved{more}</text></svg>"
    )
    return "".join(out)


def _distribution(d: InputDrift) -> str:
    """One input: reference and current histograms overlaid (a number) or side-by-side bars (categories)."""
    w, h, left, bottom, top = _SW, _SH, 36, 34, 22
    n = len(d.reference_share)
    out = [svg.svg_open(w, h, f"{d.name}: reference and current distribution")]
    verdict = "moved" if d.moved else "did not move"
    out.append(
        f'<text x="4" y="14" font-weight="bold">{svg.esc(d.name)}</text><text x="{w - 4}" y="14" text-anchor="end" '
        f'fill="{"#d32f2f" if d.moved else "#555"}">{effect_name(d)} {svg.short_num(d.statistic, 2)}, {d.test} p {svg.short_num(d.p_value, 2)}: '
        f"{verdict}"
        "</text>"
    )
    if n == 0:
        return f'<figure class="dist" data-input="{svg.esc(d.name)}">' + "".join(out) + "</svg></figure>"
    hi = max([*d.reference_share, *d.live_share, 1e-9])
    slot = (w - left - 6) / n

    def py(v: float) -> float:
        return top + (1 - v / hi) * (h - top - bottom)

    for k in range(n):
        x = left + k * slot
        if d.kind == "categorical":
            bw = slot * 0.4
            for off, v, colour, who in (
                (0.1, d.reference_share[k], "#90caf9", "reference"),
                (0.5, d.live_share[k], "#ef6c00", "current"),
            ):
                out.append(
                    f'<rect class="bar" x="{x + off * slot:.1f}" y="{py(v):.1f}" width="{bw:.1f}" '
                    f'height="{h - bottom - py(v):.1f}" fill="{colour}" data-category="{svg.esc(d.bins[k])}" data-who="{who}" '
                    f'data-share="{svg.attr_num(v)}"><title>{svg.esc(d.bins[k])}: {who} {v:.1%}</title></rect>'
                )
            label = str(d.bins[k])
            label = label if len(label) <= 9 else label[:8] + "…"
            out.append(
                f'<text x="{x + slot / 2:.1f}" y="{h - bottom + 12}" text-anchor="middle" font-size="9">{svg.esc(label)}</text>'
            )
        else:
            out.append(
                f'<rect x="{x:.1f}" y="{py(d.reference_share[k]):.1f}" width="{slot:.1f}" '
                f'height="{h - bottom - py(d.reference_share[k]):.1f}" fill="#90caf9" fill-opacity="0.7"/>'
            )
            out.append(
                f'<rect x="{x:.1f}" y="{py(d.live_share[k]):.1f}" width="{slot:.1f}" '
                f'height="{h - bottom - py(d.live_share[k]):.1f}" fill="none" stroke="#ef6c00" stroke-width="1.5"/>'
            )
    if d.kind != "categorical":
        for frac in (0.0, 0.5, 1.0):
            v = float(d.bins[0]) + frac * (float(d.bins[-1]) - float(d.bins[0]))
            anchor = {0.0: "start", 0.5: "middle", 1.0: "end"}[frac]
            out.append(
                f'<text x="{left + frac * (w - left - 6):.1f}" y="{h - bottom + 12}" text-anchor="{anchor}" '
                f'font-size="9">{svg.short_num(v)}</text>'
            )
    out.append(f'<text x="{left - 4}" y="{py(hi) + 4:.1f}" text-anchor="end" font-size="9">{hi:.0%}</text>')
    out.append(
        f'<text x="{left}" y="{h - 6}" font-size="10"><tspan fill="#1e88e5">■ reference</tspan> '
        f'<tspan fill="#ef6c00">■ current</tspan> (share of events{", raw units" if d.kind != "categorical" else ""})</text>'
    )
    return (
        f'<figure class="dist" data-input="{svg.esc(d.name)}" data-kind="{d.kind}">' + "".join(out) + "</svg></figure>"
    )


def _table(ranked: Sequence[InputDrift]) -> str:
    def centre(d: InputDrift, live: bool) -> str:
        if d.kind == "categorical":
            top = str(d.bins[0]) if d.bins else ""
            return f"{svg.esc(top)} {(d.live_share[0] if live else d.reference_share[0]):.1%}" if d.bins else "–"
        return svg.short_num(d.live_median if live else d.reference_median)

    rows = "".join(
        f'<tr><td class="l">{svg.esc(d.name)}</td><td class="l">{d.kind}</td><td class="l">{d.test}</td>'
        f"<td>{svg.short_num(d.statistic)}</td><td>{svg.short_num(d.p_value)}</td><td>{'yes' if d.moved else 'no'}</td>"
        f"<td>{centre(d, False)}</td><td>{centre(d, True)}</td></tr>"
        for d in ranked[:TABLE_INPUTS]
    )
    return (
        '<table id="drift-table"><tr><th class="l">input</th><th class="l">kind</th><th class="l">test</th>'
        "<th>effect</th><th>adjusted p</th><th>moved</th><th>reference median (raw) / top category</th>"
        f"<th>current median (raw) / top category</th></tr>{rows}</table>"
    )


# ------------------------------------------------------------------------------------------------------------ periods


def periods_chart(data: ReportData) -> str:
    """The estimate per period as a line in its band, the realized accuracy where a period has labels, and the
    reference accuracy as a labelled dashed line, on the page's time axis; then the table."""
    ps = data.periods
    if not ps:
        return f'<p class="empty">{svg.esc(data.periods_note or "no estimate per period")}</p>'
    ref = data.accuracy.reference_accuracy if data.accuracy is not None else float("nan")
    over_time = data.axis == "time"
    mids = [(p.start + p.end) / 2 for p in ps]
    x0, x1 = svg.time_range(data) or (
        min(p.start for p in ps),
        max(max(p.end for p in ps), min(p.start for p in ps) + 1e-9),
    )
    values = [v for p in ps for v in (p.lower, p.upper)] + [p.realized for p in ps if p.realized is not None]
    values += [ref] if math.isfinite(ref) else []
    lo, hi = max(min(values) - 0.03, 0.0), min(max(values) + 0.03, 1.0)
    h = 240

    def px(x: float) -> float:
        return svg.PAD_L + (x - x0) / (x1 - x0) * (svg.PLOT_W - svg.PAD_L - svg.PAD_R)

    def py(y: float) -> float:
        return svg.PAD_T + (hi - y) / (hi - lo or 1.0) * (h - svg.PAD_T - svg.PAD_B)

    out = [svg.svg_open(svg.PLOT_W, h, "estimated accuracy per period")]
    band = [f"{px(m):.1f},{py(p.upper):.1f}" for m, p in zip(mids, ps, strict=True)]
    band += [f"{px(m):.1f},{py(p.lower):.1f}" for m, p in reversed(list(zip(mids, ps, strict=True)))]
    out.append(f'<polygon points="{" ".join(band)}" fill="#90caf9" fill-opacity="0.45"/>')
    line = " ".join(f"{px(m):.1f},{py(p.estimate):.1f}" for m, p in zip(mids, ps, strict=True))
    out.append(f'<polyline points="{line}" fill="none" stroke="#0d47a1" stroke-width="2"/>')
    for m, p in zip(mids, ps, strict=True):
        out.append(
            f'<circle class="point period" cx="{px(m):.1f}" cy="{py(p.estimate):.1f}" r="3.5" fill="#0d47a1" '
            f'data-start="{svg.attr_num(p.start)}" data-end="{svg.attr_num(p.end)}" data-estimate="{svg.attr_num(p.estimate)}" '
            f'data-lower="{svg.attr_num(p.lower)}" data-upper="{svg.attr_num(p.upper)}"><title>{p.n} events: estimate '
            f"{p.estimate:.3f} [{p.lower:.3f}, {p.upper:.3f}]</title></circle>"
        )
    realized = [(m, p.realized) for m, p in zip(mids, ps, strict=True) if p.realized is not None]
    if realized:
        pts = " ".join(f"{px(m):.1f},{py(r):.1f}" for m, r in realized)
        out.append(f'<polyline points="{pts}" fill="none" stroke="#d32f2f" stroke-width="1.5" stroke-dasharray="2 2"/>')
        for m, r in realized:
            out.append(
                f'<rect class="point realized-period" x="{px(m) - 3.5:.1f}" y="{py(r) - 3.5:.1f}" width="7" height="7" '
                f'fill="#d32f2f" data-realized="{svg.attr_num(r)}"><title>realized {r:.3f}</title></rect>'
            )
    if math.isfinite(ref):
        out.append(
            f'<line x1="{svg.PAD_L}" x2="{svg.PLOT_W - svg.PAD_R}" y1="{py(ref):.1f}" y2="{py(ref):.1f}" stroke="#555" '
            f'stroke-dasharray="4 3"/><text x="{svg.PLOT_W - svg.PAD_R - 2}" y="{py(ref) - 4:.1f}" text-anchor="end" '
            f'font-size="10" fill="#555">reference accuracy {ref:.3f}</text>'
        )
    for t in svg.nice_ticks(lo, hi, 4):
        out.append(f'<text x="{svg.PAD_L - 6}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="10">{t:.2f}</text>')
    out.append(_period_axis(x0, x1, h, over_time))
    out.append(
        f'<text x="{svg.PAD_L + 4}" y="{svg.PAD_T - 6}" font-weight="bold">estimated accuracy per period (line; band: its '
        f"interval){'; red squares: realized on the labelled events' if realized else ''}</text></svg>"
    )
    note = f'<p class="meta" id="periods-note">{svg.esc(data.periods_note)}.</p>' if data.periods_note else ""
    return "".join(out) + note + _periods_table(ps, over_time)


def _period_axis(x0: float, x1: float, h: int, over_time: bool) -> str:
    y = h - svg.PAD_B + 4
    label, fmt = svg.time_axis(x0, x1) if over_time else ("event (position in the data)", None)
    out = [f'<line x1="{svg.PAD_L}" y1="{y}" x2="{svg.PLOT_W - svg.PAD_R}" y2="{y}" stroke="#888"/>']
    for t in svg.nice_ticks(0.0, x1 - x0):
        x = svg.PAD_L + t / (x1 - x0) * (svg.PLOT_W - svg.PAD_L - svg.PAD_R)
        text = fmt(t) if fmt is not None else svg.short_num(x0 + t, 4)
        out.append(f'<text x="{x:.1f}" y="{y + 13}" text-anchor="middle" font-size="10">{svg.esc(text)}</text>')
    out.append(
        f'<text x="{(svg.PAD_L + svg.PLOT_W - svg.PAD_R) / 2:.0f}" y="{y + 28}" text-anchor="middle">{svg.esc(label)}</text>'
    )
    return "".join(out)


def _periods_table(ps: Sequence[PeriodEstimate], over_time: bool) -> str:
    from monitor.offline.report_svg import utc_text

    def when(v: float) -> str:
        return utc_text(v) if over_time else f"{v:.0f}"

    rows = "".join(
        f'<tr><td class="l">{when(p.start)} – {when(p.end)}</td><td>{p.n}</td><td>{p.estimate:.3f}</td>'
        f"<td>{p.lower:.3f}</td><td>{p.upper:.3f}</td>"
        f"<td>{'–' if p.realized is None else f'{p.realized:.3f} ({p.n_labelled})'}</td></tr>"
        for p in ps
    )
    return (
        f'<table id="periods"><tr><th class="l">period ({"UTC" if over_time else "events"})</th><th>events</th>'
        f"<th>estimate</th><th>lower</th><th>upper</th><th>realized (labelled)</th></tr>{rows}</table>"
    )
