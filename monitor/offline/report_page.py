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
    _B,
    _H,
    _L,
    _R,
    _T,
    _W,
    VERDICT_COLOURS,
    _e,
    _g,
    _num,
    _svg_open,
    _ticks,
    _time_axis,
    _utc,
    _x_axis,
    time_range,
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
        f"<title>{_e(data.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(data.title)}</h1>",
        f'<p class="meta">model <code>{_e(data.model)}</code> ({_e(data.kind)}) · events <code>{_e(data.source)}</code>'
        f" · {data.n_events} events scored of {data.n_lines} lines"
        + (f' · <span id="invalid">invalid lines by reason: {_e(invalid)}</span>' if invalid else "")
        + (f' · <span id="invalid-inputs">invalid values by input: {_e(by_input)}</span>' if by_input else "")
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
    return f'<section id="{sid}"><h2>{_e(heading)}</h2>\n{body}\n</section>'


def _empty(note: str) -> str:
    return f'<p class="empty">{_e(note)}</p>'


# ------------------------------------------------------------------------------------------------------------ verdicts


def _verdicts(data: ReportData) -> str:
    if data.timeline is None:
        return _empty(data.timeline_note or "no verdict timeline")
    spans = data.spans
    segments = list(dict.fromkeys(s.segment for s in spans))
    row_h = 26
    height = _T + row_h * max(len(segments), 1) + _B
    timed = data.axis == "time" and all(math.isfinite(s.t_start) and math.isfinite(s.t_end) for s in spans) and spans
    if timed:
        t0, t1 = time_range(data) or (0.0, 1.0)
        sx = (_W - _L - _R) / (t1 - t0)
        place = [(_L + (s.t_start - t0) * sx, (s.t_end - s.t_start) * sx) for s in spans]
        label, fmt = _time_axis(t0, t1)
        lo, hi = 0.0, t1 - t0
    else:
        end = max([s.end for s in spans] + [1])
        sx = (_W - _L - _R) / end
        place = [(_L + s.start * sx, (s.end - s.start) * sx) for s in spans]
        label, fmt, lo, hi = "line of the event log", None, 0.0, float(end)
    out = [_svg_open(_W, height, "verdict timeline")]
    for k, seg in enumerate(segments):
        y = _T + k * row_h
        out.append(f'<text x="{_L - 6}" y="{y + 16}" text-anchor="end">{_e(seg)}</text>')
        for s, (x, w) in zip(spans, place, strict=True):
            if s.segment == seg:
                out.append(_span_rect(s, x, y, max(w, 1.0), row_h - 6))
    _x_axis(out, lo, hi, height - _B + 4, label, fmt)
    out.append("</svg>")
    legend = '<p class="legend">' + "".join(
        f'<span><i style="background:{c}"></i>{_e(v)}</span>' for v, c in VERDICT_COLOURS.items()
    )
    legend += "</p>"
    rows = "".join(
        f'<tr><td class="l">{_e(c.get("segment", ""))}</td><td class="l">{_when(c)}</td><td class="l">'
        f'{_e(c.get("previous", ""))} → {_e(c["verdict"])}</td><td class="l">{_e(", ".join(c.get("detectors", ())))}'
        f'</td><td class="l">{_e(", ".join(c.get("features", ())))}</td></tr>'
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
    """An entry's event time (UTC) and line, or the line alone."""
    ts = entry.get("ts")
    line = f"line {int(entry['index'])}"
    if isinstance(ts, (int, float)) and math.isfinite(float(ts)) and float(ts) > 0:
        return f"{_utc(float(ts))} UTC ({line})"
    return line


def _crossings(data: ReportData) -> str:
    """Each detector turning on or off, which the verdict changes alone do not show (a detector joining a verdict
    that is already raised)."""
    assert data.timeline is not None
    cs = data.timeline.crossings
    if not cs:
        return ""
    rows = "".join(
        f'<tr><td class="l">{_e(c.get("segment", ""))}</td><td class="l">{_when(c)}</td><td class="l">'
        f'{_e(c.get("detector", ""))}</td><td class="l">{_e(c.get("state", ""))}</td></tr>'
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
        f"<li>{_when(a)}: <b>{_e(a.get('alertname', 'alert'))}</b> {_e(a.get('state', ''))} "
        f"(segment {_e(a.get('segment', ''))}, verdict {_e(a.get('verdict', ''))})</li>"
        for a in alerts[:20]
    )
    more = f"<li>and {len(alerts) - 20} more</li>" if len(alerts) > 20 else ""
    return f'<p class="meta">{len(alerts)} alert transition(s) in the replay:</p><ul id="alerts">{items}{more}</ul>'


def _span_rect(s: VerdictSpan, x: float, y: float, w: float, h: float) -> str:
    tip = f"{s.segment}: {s.verdict} from line {s.start} to {s.end}"
    if math.isfinite(s.t_start) and math.isfinite(s.t_end):
        tip += f" ({_utc(s.t_start)} – {_utc(s.t_end)} UTC)"
    if s.detectors:
        tip += f"; detectors fired: {', '.join(s.detectors)}"
    return (
        f'<rect class="point" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" '
        f'fill="{VERDICT_COLOURS.get(s.verdict, "#999")}" data-segment="{_e(s.segment)}" data-verdict="{_e(s.verdict)}" '
        f'data-start="{s.start}" data-end="{s.end}" data-detectors="{_e(",".join(s.detectors))}">'
        f"<title>{_e(tip)}</title></rect>"
    )


# ------------------------------------------------------------------------------------------------------------ signals


def _signals(data: ReportData) -> str:
    shown = [s for s in data.signals if s.mean.size]
    if not shown:
        return _empty("no signals: no event could be scored")
    parts = [_signal_svg(s, data.n_lines, time_range(data)) for s in shown]
    medians = {s.signal: s.ref_median for s in data.signals}
    rows = "".join(
        f'<tr><td class="l">{_e(y.signal)}</td><td>{_g(y.live)}</td><td>{_g(y.reference)}</td><td>{_g(y.ratio, 2)}×</td>'
        f"<td>{_g(medians.get(y.signal, float('nan')))}</td><td>p{y.percentile:.0f}</td></tr>"
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
        label, fmt = _time_axis(start, start + x_hi)
    else:
        start, xs, x_hi = 0.0, s.line, float(max(n_lines - 1, 1))
        label, fmt = "line of the event log", None

    def px(x: float) -> float:
        return _L + x / x_hi * (_W - _L - _R)

    def py(y: float) -> float:
        return _T + (hi - y) / (hi - lo) * (_H - _T - _B)

    out = [_svg_open(_W, _H, f"{s.signal} over {'event time' if over_time else 'the log'}")]
    if math.isfinite(s.ref_low) and math.isfinite(s.ref_high):
        out.append(
            f'<rect class="band" x="{_L}" y="{py(s.ref_high):.1f}" width="{_W - _L - _R}" '
            f'height="{max(py(s.ref_low) - py(s.ref_high), 1.0):.1f}" fill="#90caf9" fill-opacity="0.35" '
            f'data-low="{_num(s.ref_low)}" data-high="{_num(s.ref_high)}"><title>reference p5–p95: '
            f"{_g(s.ref_low)} – {_g(s.ref_high)}</title></rect>"
        )
        out.append(
            f'<line x1="{_L}" x2="{_W - _R}" y1="{py(s.ref_median):.1f}" y2="{py(s.ref_median):.1f}" '
            'stroke="#1565c0" stroke-dasharray="4 3"/>'
        )
        out.append(
            f'<text x="{_W - _R - 2}" y="{py(s.ref_median) - 4:.1f}" text-anchor="end" font-size="10" fill="#1565c0">'
            f"reference median {_g(s.ref_median)}</text>"
        )
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, s.mean, strict=True))
    out.append(f'<polyline points="{pts}" fill="none" stroke="#222" stroke-width="1.5"/>')
    for k, (x, y) in enumerate(zip(xs, s.mean, strict=True)):
        line = float(s.line[k])
        where = f"{_utc(start + x, '%Y-%m-%d %H:%M:%S')} UTC (line {line:.0f})" if over_time else f"line {line:.0f}"
        data_t = f' data-time="{_num(s.time[k])}"' if s.time is not None and over_time else ""
        out.append(
            f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="#222" data-x="{_num(x)}"'
            f'{data_t} data-line="{_num(line)}" data-y="{_num(y)}"><title>{_e(where)}: {s.signal} {_g(y)}</title>'
            "</circle>"
        )
    for t in _ticks(lo, hi, 4):
        out.append(f'<text x="{_L - 6}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="10">{_g(t)}</text>')
    out.append(
        f'<text x="{_L + 4}" y="{_T - 6}" font-weight="bold">{_e(s.signal)} (line: mean per bin; band: reference '
        "p5–p95; dashed: reference median)</text>"
    )
    _x_axis(out, 0.0, x_hi, _H - _B + 4, label, fmt)
    out.append("</svg>")
    kind = "time" if over_time else "line"
    return f'<figure data-signal="{_e(s.signal)}" data-axis="{kind}">' + "".join(out) + "</figure>"


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
    height = _T + row_h * (len(items) + (1 if acc.realized is not None else 0)) + _B
    values = [v for _, m in items for v in (m["lower"], m["upper"])] + [acc.reference_accuracy]
    if acc.realized is not None:
        values.append(acc.realized)
    lo, hi = max(min(values) - 0.02, 0.0), min(max(values) + 0.02, 1.0)
    left = 120

    def px(x: float) -> float:
        return left + (x - lo) / (hi - lo or 1.0) * (_W - left - _R)

    out = [_svg_open(_W, height, "accuracy estimate")]
    for k, (name, m) in enumerate(items):
        y = _T + k * row_h + 10
        primary = name == acc.method
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{_e(name)}{" *" if primary else ""}</text>')
        out.append(
            f'<line x1="{px(m["lower"]):.1f}" x2="{px(m["upper"]):.1f}" y1="{y}" y2="{y}" stroke="#1565c0" '
            'stroke-width="3"/>'
        )
        out.append(
            f'<circle class="point" cx="{px(m["estimate"]):.1f}" cy="{y}" r="5" fill="{"#0d47a1" if primary else "#64b5f6"}" '
            f'data-method="{_e(name)}" data-estimate="{_num(m["estimate"])}" data-lower="{_num(m["lower"])}" '
            f'data-upper="{_num(m["upper"])}"><title>{_e(name)}: {m["estimate"]:.3f} [{m["lower"]:.3f}, '
            f"{m['upper']:.3f}]</title></circle>"
        )
    if acc.realized is not None:
        y = _T + len(items) * row_h + 10
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">realized</text>')
        out.append(
            f'<rect class="point realized" x="{px(acc.realized) - 5:.1f}" y="{y - 5}" width="10" height="10" '
            f'fill="#d32f2f" data-realized="{_num(acc.realized)}"><title>realized accuracy {acc.realized:.3f} on '
            f"{acc.n_labelled} labelled events</title></rect>"
        )
    x = px(acc.reference_accuracy)
    out.append(
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_T}" y2="{height - _B}" stroke="#555" stroke-dasharray="4 3" '
        f'data-reference="{_num(acc.reference_accuracy)}"/>'
    )
    out.append(f'<line x1="{left}" y1="{height - _B + 4}" x2="{_W - _R}" y2="{height - _B + 4}" stroke="#888"/>')
    for t in _ticks(lo, hi):
        out.append(f'<text x="{px(t):.1f}" y="{height - _B + 17}" text-anchor="middle" font-size="10">{t:.2f}</text>')
    out.append(
        f'<text x="{(left + _W - _R) / 2:.0f}" y="{height - 6}" text-anchor="middle">accuracy ({acc.level:.0%} '
        "interval; dashed: reference accuracy)</text></svg>"
    )
    head = (
        f'<p id="accuracy-headline">estimated accuracy <b>{acc.estimate:.3f}</b> [{acc.lower:.3f}, {acc.upper:.3f}] '
        f"({acc.level:.0%}, {_e(acc.method)}) on {acc.n} events; reference accuracy {acc.reference_accuracy:.3f}"
        + (f"; realized {acc.realized:.3f} on {acc.n_labelled} labelled events" if acc.realized is not None else "")
        + "</p>"
    )
    note = _empty(data.accuracy_note) if data.accuracy_note else ""
    warn = "".join(f'<p class="meta">warning: {_e(w)}</p>' for w in acc.warnings)
    return head + "".join(out) + note + warn


# ------------------------------------------------------------------------------------------------------------ probes


def _probes(data: ReportData) -> str:
    pr = data.probe
    if pr is None:
        return _empty(data.probe_note or "no probe profile")
    mri = pr.mri
    head = (
        f'<p class="meta">{data.n_flagged} event(s) with γ above the reference p99 ({_g(data.flag_threshold)}); '
        f"the {pr.result.n_points} with the highest γ probed as one region ({pr.result.total_rows} model rows"
        + ("" if pr.result.complete else f"; budget exhausted in stage '{_e(pr.result.stopped_at)}'")
        + ").</p>"
    )
    if not mri:
        return head + _empty("the funnel stopped before the MRI stage (budget)")
    bar_h = 20
    left = 170
    height = _T + bar_h * len(mri) + _B
    out = [_svg_open(_W, height, "probe MRI")]
    for k, (name, r) in enumerate(mri.items()):
        y = _T + k * bar_h
        out.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{_e(name)}</text>')
        out.append(
            f'<rect class="point" x="{left}" y="{y + 2}" width="{max(r, 0.0) * (_W - left - _R):.1f}" height="{bar_h - 5}" '
            f'fill="{"#d32f2f" if r < 0.9 else "#4caf50"}" data-perturbation="{_e(name)}" data-value="{_num(r)}">'
            f"<title>{_e(name)}: MRI r {r:.3f} (share of outputs unchanged)</title></rect>"
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
        return "–" if v is None else _g(float(v))

    rows = "".join(
        f'<tr><td class="l">{_e(t.get("perturbation", ""))}</td><td class="l">{_e(name(t))}</td>'
        f'<td data-value="{_num(float(t["eps_star"]))}">{_g(float(t["eps_star"]))}</td>'
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
