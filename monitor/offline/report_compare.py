"""The report page's section "Two models": the model beside a candidate on the same events, drawn from
:func:`monitor.compare`'s result alone (:class:`~monitor.comparison.Comparison`).

The seed-001 table (per model: mean γ, flicker, P_adj, confidence, the estimated accuracy with its interval and the
realized accuracy where labels were given), the paired differences with their intervals and the model each axis
favours, the Pareto statement and the verdict, the share of events on which the two predict different classes and
the inputs those events share. The other sections pair the candidate with the model where they speak of it
(:mod:`monitor.offline.report_paired`: both Gamma Maps side by side, per segment γ and the verdict, the accuracy
estimates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monitor.comparison.result import ALL
from monitor.offline.report_paired import f
from monitor.offline.report_svg import esc

if TYPE_CHECKING:
    from monitor.comparison import Comparison
    from monitor.offline.report_data import ReportData


def two_models(data: ReportData) -> str:
    """The section's body: the comparison's tables and maps, or why there is none."""
    cmp = data.comparison
    note = f'<p class="empty">{esc(data.comparison_note)}</p>' if data.comparison_note else ""
    if cmp is None:
        return note or '<p class="empty">no comparison</p>'
    verdicts = [v for v in cmp.rows("verdicts") if v["segment"] == ALL]
    parts = [_models_table(cmp)]
    for v in verdicts:
        parts.append(_pair(cmp, v))
    parts.append(note)
    # the page asks for no ε* profile (its own probe section covers the flagged events): that note is not news here
    parts += [
        f'<p class="meta">{esc(n)}</p>' for n in cmp.notes if not n.startswith("the ε* probe profile was skipped")
    ]
    return "\n".join(p for p in parts if p)


def _models_table(cmp: Comparison) -> str:
    """Mean γ and the other signals per model over every event (as seed 001's Tables 1–2 show them)."""
    head = (
        '<tr><th class="l">model</th><th>events</th><th>mean γ</th><th>flicker</th><th>P_adj</th>'
        "<th>confidence</th><th>estimated accuracy [interval]</th><th>realized accuracy</th></tr>"
    )
    rows = []
    for r in cmp.rows("models"):
        if r["segment"] != ALL:
            continue
        est = r.get("accuracy_estimate")
        lo, hi = r.get("accuracy_lower"), r.get("accuracy_upper")
        est_txt = f(est, ".3f") + ("" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]")
        est_txt += "" if est is None else f" {esc(str(r.get('accuracy_method') or ''))}"  # the method beside it
        rows.append(
            f'<tr data-model="{esc(r["model"])}" data-gamma="{f(r["gamma"], ".6g")}">'
            f'<td class="l">{esc(r["model"])}</td><td>{r["valid"]} of {r["rows"]}</td><td>{f(r["gamma"], ".4g")}</td>'
            f"<td>{f(r['flicker'], '.3f')}</td><td>{f(r.get('p_adj'), '.3f')}</td>"
            f"<td>{f(r.get('confidence'), '.3f')}</td><td>{est_txt}</td><td>{f(r.get('accuracy'), '.3f')}</td></tr>"
        )
    return f'<table id="models-table">{head}{"".join(rows)}</table>'


def _pair(cmp: Comparison, v: dict[str, Any]) -> str:
    """One pair: the verdict, the Pareto statement, the disagreement and the paired differences."""
    a, b = v["a"], v["b"]
    lines = [
        f'<p class="verdict" data-verdict="{esc(v["verdict"])}"><b>{esc(b)}</b> beside <b>{esc(a)}</b>: '
        f"<b>{esc(v['verdict'])}</b>. {esc(v['statement'])}. More fragile (γ, flicker): {esc(v['more_fragile'])}.</p>"
    ]
    if v.get("disagreement") is not None:
        shared = [s for s in cmp.rows("disagreement_inputs") if s["a"] == a and s["b"] == b]
        inputs = ", ".join(f"{s['input']} ({s['statistic']:.2f})" for s in shared)
        lines.append(
            f'<p class="disagreement" data-share="{v["disagreement"]:.6g}">They predict different classes on '
            f"{v['disagreement']:.1%} of the events [{v['disagreement_lower']:.1%}, {v['disagreement_upper']:.1%}]"
            + (f"; those events differ most in: {esc(inputs)}" if inputs else "")
            + ".</p>"
        )
    head = (
        f'<tr><th class="l">axis</th><th>{esc(a)}</th><th>{esc(b)}</th><th>difference ({esc(a)} − {esc(b)}) [interval]'
        '</th><th class="l">favours</th></tr>'
    )
    rows = [
        f'<tr data-axis="{esc(d["axis"])}"><td class="l">{esc(d["axis"])}</td><td>{f(d["mean_a"], ".4g")}</td>'
        f"<td>{f(d['mean_b'], '.4g')}</td><td>{f(d['difference'], '+.3g')} [{f(d['lower'], '+.3g')}, "
        f'{f(d["upper"], "+.3g")}]</td><td class="l">{esc(d["favours"])}</td></tr>'
        for d in cmp.rows("pairs")
        if d["a"] == a and d["b"] == b and d["segment"] == ALL
    ]
    lines.append(f'<table class="pairs">{head}{"".join(rows)}</table>')
    return "\n".join(lines)
