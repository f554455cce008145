"""The report page, drawn from :class:`~monitor.offline.report_data.ReportData` alone.

One HTML document, self-contained: inline CSS and inline SVG, no script, nothing fetched (it opens offline and can
be mailed). Each section is ``<section id="…">`` (:data:`~monitor.offline.report_data.SECTIONS`) holding one figure
whose data points carry their exact values in ``data-*`` attributes (what the tests compare with the typed results),
a table of the same numbers, or a paragraph ``class="empty"`` saying why there is nothing to draw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from monitor.gammamap import render_svg
from monitor.offline.report_compare import two_models
from monitor.offline.report_data import TWO_MODELS
from monitor.offline.report_page_inputs import inputs_section, periods_chart, summary
from monitor.offline.report_paired import accuracy_table, maps, segments_table
from monitor.offline.report_svg import (
    PAD_B,
    PAD_L,
    PAD_R,
    PAD_T,
    PLOT_H,
    PLOT_W,
    VERDICT_COLOURS,
    attr_num,
    esc,
    nice_ticks,
    short_num,
    svg_open,
    time_axis,
    time_range,
    utc_text,
    x_axis,
)

if TYPE_CHECKING:
    from monitor.offline.report_data import ReportData, SignalSeries, VerdictSpan

#: threshold rows of the probe table (the smallest ε* first)
THRESHOLD_ROWS = 40

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:900px;color:#222}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
.meta{color:#555;font-size:13px} table{border-collapse:collapse;font-size:13px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#f5f5f5} td.l,th.l{text-align:left}
p.empty{color:#777;font-style:italic} svg{display:block;max-width:100%;height:auto}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:8px} figure{margin:6px 0}
#summary{background:#fafafa;border:1px solid #ddd;padding:4px 14px} #summary li{margin:4px 0;font-size:14px}
.v{color:white;padding:0 5px;border-radius:3px}
"""


def render_page(data: ReportData) -> str:
    """The whole page for ``data``."""
    invalid = ", ".join(f"{k}: {v}" for k, v in sorted(data.invalid.items()))
    by_input = ", ".join(f"{k} {v}" for k, v in sorted(data.invalid_inputs.items()))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(data.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{esc(data.title)}</h1>",
        f'<p class="meta">model <code>{esc(data.model)}</code> ({esc(data.kind)}) · events <code>{esc(data.source)}</code>'
        f" · {data.n_events} events scored of {data.n_lines} lines"
        + (f' · <span id="invalid">invalid lines by reason: {esc(invalid)}</span>' if invalid else "")
        + (f' · <span id="invalid-inputs">invalid values by input: {esc(by_input)}</span>' if by_input else "")
        + "</p>",
        _section("summary", "Summary", summary(data)),
        _section("verdicts", "Verdict timeline per segment", _verdicts(data) + segments_table(data)),
        _section(
            "signals",
            "Signals over "
            + ("event time" if any(x.time is not None for x in data.signals) else "the log")
            + " against the reference",
            _signals(data),
        ),
        _section("gammamap", "Gamma Map", _gammamap(data) + maps(data)),
        _section("drift", "Per-input drift: reference against the events", inputs_section(data)),
        _section(
            "accuracy", "Estimated performance per period", periods_chart(data) + _accuracy(data) + accuracy_table(data)
        ),
        _section("probes", "Probe profile of the flagged events", _probes(data)),
        _section(TWO_MODELS, "Two models", two_models(data)) if data.comparison or data.comparison_note else "",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _section(sid: str, heading: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(heading)}</h2>\n{body}\n</section>'


def _empty(note: str) -> str:
    return f'<p class="empty">{esc(note)}</p>'


# ------------------------------------------------------------------------------------------------------------ verdicts


def _verdicts(data: ReportData) -> str:
    if data.timeline is None:
        return _empty(data.timeline_note or "no verdict timeline")
    spans = data.spans
    segments = list(dict.fromkeys(s.segment for s in spans))
    row_h = 26
    height = PAD_T + row_h * max(len(segments), 1) + PAD_B
    timed = data.axis == "time" and all(math.isfinite(s.t_start) and math.isfinite(s.t_end) for s in spans) and spans
    if timed:
        t0, t1 = time_range(data) or (0.0, 1.0)
        sx = (PLOT_W - PAD_L - PAD_R) / (t1 - t0)
        place = [(PAD_L + (s.t_start - t0) * sx, (s.t_end - s.t_start) * sx) for s in spans]
        label, fmt = time_axis(t0, t1)
        lo, hi = 0.0, t1 - t0
    else:
        end = max([s.end for s in spans] + [1])
        sx = (PLOT_W - PAD_L - PAD_R) / end
        place = [(PAD_L + s.start * sx, (s.end - s.start) * sx) for s in spans]
        label, fmt, lo, hi = "line of the event log", None, 0.0, float(end)
    out = [svg_open(PLOT_W, height, "verdict timeline")]
    for k, seg in enumerate(segments):
        y = PAD_T + k * row_h
        out.append(f'<text x="{PAD_L - 6}" y="{y + 16}" text-anchor="end">{esc(seg)}</text>')
        for s, (x, w) in zip(spans, place, strict=True):
            if s.segment == seg:
                out.append(_span_rect(s, x, y, max(w, 1.0), row_h - 6))
    x_axis(out, lo, hi, height - PAD_B + 4, label, fmt)
    out.append("</svg>")
    legend = '<p class="legend">' + "".join(
        f'<span><i style="background:{c}"></i>{esc(v)}</span>' for v, c in VERDICT_COLOURS.items()
    )
    legend += "</p>"
    rows = "".join(
        f'<tr><td class="l">{esc(c.get("segment", ""))}</td><td class="l">{_when(c)}</td><td class="l">'
        f'{esc(c.get("previous", ""))} → {esc(c["verdict"])}</td><td class="l">{esc(_fired(c))}'
        f'</td><td class="l">{esc(", ".join(c.get("features", ())))}</td></tr>'
        for c in data.timeline.changes
    )
    table = (
        '<table><tr><th class="l">segment</th><th class="l">when</th><th class="l">verdict</th><th class="l">'
        f'detectors fired</th><th class="l">inputs moved</th></tr>{rows}</table>'
        if rows
        else _empty(f"no verdict change: every segment stayed stable over {data.timeline.events} events")
    )
    if data.replay_batch:
        table += (
            f'<p class="meta">Replayed here in micro-batches of {data.replay_batch} events: a change is placed within '
            f"{data.replay_batch} events of the event that decided it.</p>"
        )
    return "".join(out) + legend + table + _crossings(data) + _alerts(data)


def _when(entry: Mapping[str, Any]) -> str:
    """An entry's event time (UTC) and line, or the line alone (1-based, as an editor numbers the file's lines; the
    timeline's ``index`` is 0-based)."""
    ts = entry.get("ts")
    line = f"line {int(entry['index']) + 1}"
    if isinstance(ts, (int, float)) and math.isfinite(float(ts)) and float(ts) > 0:
        return f"{utc_text(float(ts))} UTC ({line})"
    return line


def _crossings(data: ReportData) -> str:
    """Each detector turning on or off, which the verdict changes alone do not show (a detector joining a verdict
    that is already raised)."""
    assert data.timeline is not None
    cs = data.timeline.crossings
    if not cs:
        return ""
    rows = "".join(
        f'<tr><td class="l">{esc(c.get("segment", ""))}</td><td class="l">{_when(c)}</td><td class="l">'
        f'{esc(c.get("detector", ""))}</td><td class="l">{esc(c.get("state", ""))}</td></tr>'
        for c in cs[:40]
    )
    more = f'<p class="meta">and {len(cs) - 40} more detector crossings.</p>' if len(cs) > 40 else ""
    return (
        '<details><summary>Detectors turning on and off</summary><table id="crossings"><tr><th class="l">segment</th>'
        f'<th class="l">when</th><th class="l">detector</th><th class="l">state</th></tr>{rows}</table>{more}</details>'
    )


def _alerts(data: ReportData) -> str:
    assert data.timeline is not None
    alerts = data.timeline.alerts
    if not alerts:
        return '<p class="meta" id="alerts">No alert transition in the replay.</p>'
    items = "".join(
        f"<li>{_when(a)}: <b>{esc(a.get('alertname', 'alert'))}</b> {esc(a.get('state', ''))} "
        f"(segment {esc(a.get('segment', ''))}, verdict {esc(a.get('verdict', ''))})</li>"
        for a in alerts[:20]
    )
    more = f"<li>and {len(alerts) - 20} more</li>" if len(alerts) > 20 else ""
    return f'<p class="meta">{len(alerts)} alert transition(s) in the replay:</p><ul id="alerts">{items}{more}</ul>'


def _fired(change: Mapping[str, Any]) -> str:
    """The detectors a verdict change fired on, and why they are not harm where the change says so."""
    text = ", ".join(change.get("detectors", ()))
    why = "; ".join(change.get("not_harm", ()))
    return f"{text} ({why})" if why else text


def _span_rect(s: VerdictSpan, x: float, y: float, w: float, h: float) -> str:
    tip = f"{s.segment}: {s.verdict} from line {s.start + 1} to {s.end}"  # [start, end) 0-based: lines 1-based
    if math.isfinite(s.t_start) and math.isfinite(s.t_end):
        tip += f" ({utc_text(s.t_start)} – {utc_text(s.t_end)} UTC)"
    if s.detectors:
        tip += f"; detectors fired: {', '.join(s.detectors)}"
    return (
        f'<rect class="point" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" '
        f'fill="{VERDICT_COLOURS.get(s.verdict, "#999")}" data-segment="{esc(s.segment)}" data-verdict="{esc(s.verdict)}" '
        f'data-start="{s.start}" data-end="{s.end}" data-detectors="{esc(",".join(s.detectors))}">'
        f"<title>{esc(tip)}</title></rect>"
    )


# ------------------------------------------------------------------------------------------------------------ signals


def _signals(data: ReportData) -> str:
    shown = [s for s in data.signals if s.mean.size]
    if not shown:
        return _empty("no signals: no event could be scored")
    parts = [_signal_svg(s, data.n_lines, time_range(data)) for s in shown]
    medians = {s.signal: s.ref_median for s in data.signals}
    rows = "".join(
        f'<tr><td class="l">{esc(y.signal)}</td><td>{short_num(y.live)}</td><td>{short_num(y.reference)}</td><td>{short_num(y.ratio, 2)}×</td>'
        f"<td>{short_num(medians.get(y.signal, float('nan')))}</td><td>p{y.percentile:.0f}</td></tr>"
        for y in data.yardstick
    )
    table = (
        '<table id="yardstick"><tr><th class="l">signal</th><th>live mean</th><th>reference mean</th><th>ratio of '
        "means</th><th>reference median (the dashed line)</th><th>live median at reference percentile</th></tr>"
        f"{rows}</table>"
        if rows
        else _empty("no yardstick: the reference keeps no signal samples")
    )
    return table + "".join(parts)


def _signal_svg(s: SignalSeries, n_lines: int, axis: tuple[float, float] | None = None) -> str:
    values = [float(v) for v in s.mean] + [v for v in (s.ref_low, s.ref_high) if math.isfinite(v)]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or (abs(hi) * 0.1 or 1.0)
    lo, hi = lo - pad, hi + pad
    over_time = s.time is not None and s.time.size > 0
    if s.time is not None and over_time:  # x: seconds after the first bin's time
        start = float(s.time.min()) if axis is None else axis[0]
        xs = s.time - start
        x_hi = float(max(float(xs.max()), 1e-9)) if axis is None else axis[1] - axis[0]
        label, fmt = time_axis(start, start + x_hi)
    else:
        start, xs, x_hi = 0.0, s.line, float(max(n_lines - 1, 1))
        label, fmt = "line of the event log", None

    def px(x: float) -> float:
        return PAD_L + x / x_hi * (PLOT_W - PAD_L - PAD_R)

    def py(y: float) -> float:
        return PAD_T + (hi - y) / (hi - lo) * (PLOT_H - PAD_T - PAD_B)

    out = [svg_open(PLOT_W, PLOT_H, f"{s.signal} over {'event time' if over_time else 'the log'}")]
    if math.isfinite(s.ref_low) and math.isfinite(s.ref_high):
        out.append(
            f'<rect class="band" x="{PAD_L}" y="{py(s.ref_high):.1f}" width="{PLOT_W - PAD_L - PAD_R}" '
            f'height="{max(py(s.ref_low) - py(s.ref_high), 1.0):.1f}" fill="#90caf9" fill-opacity="0.35" '
            f'data-low="{attr_num(s.ref_low)}" data-high="{attr_num(s.ref_high)}"><title>reference p5–p95: '
            f"{short_num(s.ref_low)} – {short_num(s.ref_high)}</title></rect>"
        )
        out.append(
            f'<line x1="{PAD_L}" x2="{PLOT_W - PAD_R}" y1="{py(s.ref_median):.1f}" y2="{py(s.ref_median):.1f}" '
            'stroke="#1565c0" stroke-dasharray="4 3"/>'
        )
        out.append(
            f'<text x="{PLOT_W - PAD_R - 2}" y="{py(s.ref_median) - 4:.1f}" text-anchor="end" font-size="10" fill="#1565c0">'
            f"reference median {short_num(s.ref_median)}</text>"
        )
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, s.mean, strict=True))
    out.append(f'<polyline points="{pts}" fill="none" stroke="#222" stroke-width="1.5"/>')
    for k, (x, y) in enumerate(zip(xs, s.mean, strict=True)):
        line = float(s.line[k])
        shown = f"line {line + 1:.0f}"  # 1-based, as an editor numbers the lines (``data-line``: 0-based)
        where = f"{utc_text(start + x, '%Y-%m-%d %H:%M:%S')} UTC ({shown})" if over_time else shown
        data_t = f' data-time="{attr_num(s.time[k])}"' if s.time is not None and over_time else ""
        out.append(
            f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="#222" data-x="{attr_num(x)}"'
            f'{data_t} data-line="{attr_num(line)}" data-y="{attr_num(y)}"><title>{esc(where)}: {s.signal} {short_num(y)}</title>'
            "</circle>"
        )
    for t in nice_ticks(lo, hi, 4):
        out.append(f'<text x="{PAD_L - 6}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="10">{short_num(t)}</text>')
    out.append(
        f'<text x="{PAD_L + 4}" y="{PAD_T - 6}" font-weight="bold">{esc(s.signal)} (line: mean per bin; band: reference '
        "p5–p95; dashed: reference median)</text>"
    )
    x_axis(out, 0.0, x_hi, PLOT_H - PAD_B + 4, label, fmt)
    out.append("</svg>")
    kind = "time" if over_time else "line"
    return f'<figure data-signal="{esc(s.signal)}" data-axis="{kind}">' + "".join(out) + "</figure>"


# ------------------------------------------------------------------------------------------------------------ gamma map


def _gammamap(data: ReportData) -> str:
    if data.gamma_map is None:
        return _empty(data.gamma_map_note or "no Gamma Map")
    svg = render_svg(
        data.gamma_map, data.reference_gamma_map, title=f"{data.gamma_map.total} events", classes=data.gamma_map_classes
    )
    return f'<figure data-total="{data.gamma_map.total}">{svg}</figure>'


# ------------------------------------------------------------------------------------------------------------ drift


# ------------------------------------------------------------------------------------------------------------ accuracy


def _accuracy(data: ReportData) -> str:
    acc = data.accuracy
    if acc is None:
        return _empty(data.accuracy_note or "no accuracy estimate")
    items = list(acc.methods.items())
    row_h = 26
    height = PAD_T + row_h * (len(items) + (1 if acc.realized is not None else 0)) + PAD_B
    values = [v for _, m in items for v in (m["lower"], m["upper"])] + [acc.reference_accuracy]
    if acc.realized is not None:
        values.append(acc.realized)
    lo, hi = max(min(values) - 0.02, 0.0), min(max(values) + 0.02, 1.0)
    left = 120

    def px(x: float) -> float:
        return left + (x - lo) / (hi - lo or 1.0) * (PLOT_W - left - PAD_R)

    out = [svg_open(PLOT_W, height, "accuracy estimate")]
    for k, (name, m) in enumerate(items):
        y = PAD_T + k * row_h + 10
        primary = name == acc.method
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{esc(name)}{" *" if primary else ""}</text>')
        out.append(
            f'<line x1="{px(m["lower"]):.1f}" x2="{px(m["upper"]):.1f}" y1="{y}" y2="{y}" stroke="#1565c0" '
            'stroke-width="3"/>'
        )
        out.append(
            f'<circle class="point" cx="{px(m["estimate"]):.1f}" cy="{y}" r="5" fill="{"#0d47a1" if primary else "#64b5f6"}" '
            f'data-method="{esc(name)}" data-estimate="{attr_num(m["estimate"])}" data-lower="{attr_num(m["lower"])}" '
            f'data-upper="{attr_num(m["upper"])}"><title>{esc(name)}: {m["estimate"]:.3f} [{m["lower"]:.3f}, '
            f"{m['upper']:.3f}]</title></circle>"
        )
    if acc.realized is not None:
        y = PAD_T + len(items) * row_h + 10
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">realized</text>')
        out.append(
            f'<rect class="point realized" x="{px(acc.realized) - 5:.1f}" y="{y - 5}" width="10" height="10" '
            f'fill="#d32f2f" data-realized="{attr_num(acc.realized)}"><title>realized accuracy {acc.realized:.3f} on '
            f"{acc.n_labelled} labelled events</title></rect>"
        )
    x = px(acc.reference_accuracy)
    out.append(
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{height - PAD_B}" stroke="#555" stroke-dasharray="4 3" '
        f'data-reference="{attr_num(acc.reference_accuracy)}"/>'
    )
    out.append(
        f'<line x1="{left}" y1="{height - PAD_B + 4}" x2="{PLOT_W - PAD_R}" y2="{height - PAD_B + 4}" stroke="#888"/>'
    )
    for t in nice_ticks(lo, hi):
        out.append(
            f'<text x="{px(t):.1f}" y="{height - PAD_B + 17}" text-anchor="middle" font-size="10">{t:.2f}</text>'
        )
    out.append(
        f'<text x="{(left + PLOT_W - PAD_R) / 2:.0f}" y="{height - 6}" text-anchor="middle">accuracy ({acc.level:.0%} '
        "interval; dashed: reference accuracy)</text></svg>"
    )
    head = (
        f'<p id="accuracy-headline">estimated accuracy <b>{acc.estimate:.3f}</b> [{acc.lower:.3f}, {acc.upper:.3f}] '
        f"({acc.level:.0%}, {esc(acc.method)}) on {acc.n} events; reference accuracy {acc.reference_accuracy:.3f}"
        + (f"; realized {acc.realized:.3f} on {acc.n_labelled} labelled events" if acc.realized is not None else "")
        + "</p>"
    )
    note = _empty(data.accuracy_note) if data.accuracy_note else ""
    warn = "".join(f'<p class="meta">warning: {esc(w)}</p>' for w in acc.warnings)
    return head + "".join(out) + note + warn


# ------------------------------------------------------------------------------------------------------------ probes


def _probes(data: ReportData) -> str:
    pr = data.probe
    if pr is None:
        return _empty(data.probe_note or "no probe profile")
    mri = pr.mri
    head = (
        f'<p class="meta">{data.n_flagged} event(s) with γ above the reference p99 ({short_num(data.flag_threshold)}); '
        f"the {pr.result.n_points} with the highest γ probed as one region ({pr.result.total_rows} model rows"
        + ("" if pr.result.complete else f"; budget exhausted in stage '{esc(pr.result.stopped_at)}'")
        + ").</p>"
    )
    if not mri:
        return head + _empty("the funnel stopped before the MRI stage (budget)")
    bar_h = 20
    left = 170
    height = PAD_T + bar_h * len(mri) + PAD_B
    out = [svg_open(PLOT_W, height, "probe MRI")]
    for k, (name, r) in enumerate(mri.items()):
        y = PAD_T + k * bar_h
        out.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{esc(name)}</text>')
        out.append(
            f'<rect class="point" x="{left}" y="{y + 2}" width="{max(r, 0.0) * (PLOT_W - left - PAD_R):.1f}" height="{bar_h - 5}" '
            f'fill="{"#d32f2f" if r < 0.9 else "#4caf50"}" data-perturbation="{esc(name)}" data-value="{attr_num(r)}">'
            f"<title>{esc(name)}: MRI r {r:.3f} (share of outputs unchanged)</title></rect>"
        )
    out.append(
        f'<text x="{left}" y="{height - 10}">MRI r: the share of outputs unchanged at the moderate intensity '
        "(red: below 0.9, examined further)</text></svg>"
    )
    table = _thresholds(data)
    return head + "".join(out) + table


def _thresholds(data: ReportData) -> str:
    """ε* per perturbation and input, by the input's name, in raw units beside standardized ones (the probe
    report's ``name`` and ``eps_star_raw``)."""
    assert data.probe is not None
    crossed = [t for t in data.probe.report.get("thresholds", ()) if t.get("eps_star") is not None]
    entries = sorted(crossed, key=lambda t: float(t["eps_star"]))[:THRESHOLD_ROWS]
    names = data.feature_names

    def name(t: Mapping[str, Any]) -> str:
        f = t.get("feature")
        if isinstance(f, int) and 0 <= f < len(names):
            return names[f]
        return "all inputs" if f is None else str(t.get("name") or f)

    def raw(v: Any) -> str:
        return "–" if v is None else short_num(float(v))

    rows = "".join(
        f'<tr><td class="l">{esc(t.get("perturbation", ""))}</td><td class="l">{esc(name(t))}</td>'
        f'<td data-value="{attr_num(float(t["eps_star"]))}">{short_num(float(t["eps_star"]))}</td>'
        f"<td>{raw(t.get('eps_star_raw'))}</td></tr>"
        for t in entries
    )
    if not rows:
        return _empty("no threshold crossed within the searched range")
    if len(crossed) > len(entries):
        rows += f'<tr><td class="l" colspan="4">and {len(crossed) - len(entries)} more of larger ε*</td></tr>'
    return (
        '<table id="thresholds"><tr><th class="l">perturbation</th><th class="l">input</th><th>ε* (standardized)</th>'
        f"<th>ε* (raw units)</th></tr>{rows}</table>"
    )
