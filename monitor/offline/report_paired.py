"""The report page's sections paired with a candidate (``report(..., candidate=)``): where a section speaks of the
model, the candidate stands beside it on the same events, drawn from the comparison (:func:`monitor.compare`) alone.

- Summary: one line, the comparison's verdict over every event and per segment.
- Verdict timeline: per segment, both models' mean γ and P_adj, the paired difference of γ (model − candidate, as in
  "Two models") with its interval and the
  comparison's verdict there (``models``' per-segment rows, seed 001's Tables 1–2 per segment).
- Gamma Map: both models' maps side by side on the same events (the one renderer, :func:`monitor.gammamap.render_svg`).
- Estimated performance: per segment, both models' label-free accuracy estimates with their intervals, and the
  realized accuracy where labels were given.

The signals against the reference and the per-input drift are of the events, which both models read: those sections
serve both. The section "Two models" keeps what is the pair's alone (every axis's paired difference, the Pareto
statement, the disagreement and the inputs it shares).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from monitor.comparison.result import ALL
from monitor.gammamap import render_svg
from monitor.offline.report_svg import esc

if TYPE_CHECKING:
    from monitor.comparison import Comparison
    from monitor.offline.report_data import ReportData


def f(v: Any, spec: str) -> str:
    """``v`` formatted, or a dash where there is no finite value."""
    return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def _pair(cmp: Comparison) -> tuple[str, str] | None:
    """(model, candidate): the first pair the comparison judged."""
    verdicts = cmp.rows("verdicts")
    return (verdicts[0]["a"], verdicts[0]["b"]) if verdicts else None


def _segments(cmp: Comparison) -> list[str]:
    """Every event first, then each segment (none when one segment holds every event)."""
    segs = list(dict.fromkeys(r["segment"] for r in cmp.rows("models") if r["segment"] != ALL))
    return [ALL] + (segs if len(segs) > 1 else [])


def _table(tid: str, caption: str, head: str, rows: list[str]) -> str:
    return f'<p class="meta">{caption}</p><table id="{tid}"><tr>{head}</tr>{"".join(rows)}</table>'


def _paired(data: ReportData, draw: Callable[[Comparison, str, str], str]) -> str:
    cmp = data.comparison
    pair = None if cmp is None else _pair(cmp)
    return "" if cmp is None or pair is None else draw(cmp, *pair)


def summary_line(data: ReportData) -> str:
    """The summary's line on the candidate: the verdict over every event, and where a segment's differs."""
    return _paired(data, _summary)


def _summary(cmp: Comparison, a: str, b: str) -> str:
    verdicts = {v["segment"]: v for v in cmp.rows("verdicts") if v["a"] == a and v["b"] == b}
    whole = verdicts.get(ALL)
    if whole is None:
        return ""
    other = [
        f"{esc(s)}: {esc(v['verdict'])}" for s, v in verdicts.items() if s != ALL and v["verdict"] != whole["verdict"]
    ]
    return (
        f'<b>Beside the candidate</b> <code>{esc(b)}</code>: <span id="summary-comparison">{esc(whole["verdict"])}'
        f"</span> ({esc(whole['statement'])})" + (f"; but {'; '.join(other)}" if other else "") + "."
    )


def segments_table(data: ReportData) -> str:
    """Per segment: both models' mean γ and P_adj, the paired difference of γ (model − candidate) and the verdict."""
    return _paired(data, _segments_table)


def _segments_table(cmp: Comparison, a: str, b: str) -> str:
    models = {(r["model"], r["segment"]): r for r in cmp.rows("models")}
    gamma = {d["segment"]: d for d in cmp.rows("pairs") if d["a"] == a and d["b"] == b and d["axis"] == "gamma"}
    verdicts = {v["segment"]: v["verdict"] for v in cmp.rows("verdicts") if v["a"] == a and v["b"] == b}
    rows = []
    for seg in _segments(cmp):
        ra, rb, d = models.get((a, seg), {}), models.get((b, seg), {}), gamma.get(seg)
        diff = "–" if d is None else f"{f(d['difference'], '+.3g')} [{f(d['lower'], '+.3g')}, {f(d['upper'], '+.3g')}]"
        rows.append(
            f'<tr data-segment="{esc(seg)}" data-verdict="{esc(verdicts.get(seg, ""))}"><td class="l">{esc(seg)}</td>'
            f"<td>{ra.get('valid', '–')}</td><td>{f(ra.get('gamma'), '.4g')}</td><td>{f(rb.get('gamma'), '.4g')}</td>"
            f"<td>{diff}</td><td>{f(ra.get('p_adj'), '.3f')}</td><td>{f(rb.get('p_adj'), '.3f')}</td>"
            f'<td class="l">{esc(verdicts.get(seg, "–"))}</td></tr>'
        )
    head = (
        f'<th class="l">segment</th><th>events</th><th>γ {esc(a)}</th><th>γ {esc(b)}</th><th>γ difference '
        f"({esc(a)} − {esc(b)}) [interval]</th><th>P_adj {esc(a)}</th><th>P_adj {esc(b)}</th>"
        '<th class="l">comparison</th>'
    )
    caption = f"Beside the candidate <code>{esc(b)}</code> on the same events, per segment (section Two models):"
    return _table("paired-segments", caption, head, rows)


def accuracy_table(data: ReportData) -> str:
    """Per segment: both models' label-free accuracy estimates with their intervals, and the realized accuracy."""
    return _paired(data, _accuracy_table)


def _accuracy_table(cmp: Comparison, a: str, b: str) -> str:
    models = {(r["model"], r["segment"]): r for r in cmp.rows("models")}
    if not any(r.get("accuracy_estimate") is not None for r in models.values()):
        return ""
    realized = any(r.get("accuracy") is not None for r in models.values())

    def cell(r: dict[str, Any]) -> str:
        lo, hi = r.get("accuracy_lower"), r.get("accuracy_upper")
        est = f(r.get("accuracy_estimate"), ".3f") + ("" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]")
        return f"<td>{est}</td>" + (f"<td>{f(r.get('accuracy'), '.3f')}</td>" if realized else "")

    rows = [
        f'<tr data-segment="{esc(seg)}"><td class="l">{esc(seg)}</td>'
        + cell(models.get((a, seg), {}))
        + cell(models.get((b, seg), {}))
        + "</tr>"
        for seg in _segments(cmp)
    ]
    head = '<th class="l">segment</th>' + "".join(
        f"<th>{esc(m)}: estimated [interval]</th>" + (f"<th>{esc(m)}: realized</th>" if realized else "")
        for m in (a, b)
    )
    caption = f"Both models' accuracy estimated without labels on the same events, the candidate <code>{esc(b)}</code> beside:"
    return _table("paired-accuracy", caption, head, rows)


def maps(data: ReportData) -> str:
    """Both models' Gamma Maps side by side on the same events, the model's on the left."""
    cmp = data.comparison
    if cmp is None:
        return ""
    names = list(cmp.gamma_maps)
    if len(names) < 2:
        return '<p class="empty">no paired Gamma Maps: they plot γ against the predicted class\'s probability, which a regressor has not</p>'
    first, second = names[0], names[1]
    svg = render_svg(
        cmp.gamma_maps[second],
        cmp.gamma_maps[first],
        title="the same events",
        labels=(second, first),
        classes=data.gamma_map_classes,
    )
    return (
        f'<p class="meta">Beside the candidate <code>{esc(second)}</code>, both maps on the same events:</p>'
        f'<figure class="maps" data-models="{esc(first)},{esc(second)}">{svg}</figure>'
    )
