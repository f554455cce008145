"""Generate docs/METRICS.md from the metric catalogue (``monitor.telemetry.METRICS``).

    .venv/bin/python scripts/gen_metrics_doc.py           # rewrite docs/METRICS.md
    .venv/bin/python scripts/gen_metrics_doc.py --check   # exit 1 when docs/METRICS.md is out of date

Name, type, labels, help text and buckets come from METRICS; the unit, the group and "how to use it" of each
metric come from its declaration in monitor/telemetry/ (``group=``, ``unit=``, ``use=``). A series declared without
them is an error, so tests/unit/test_metrics_doc.py fails until the new series is documented.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from monitor.drift.verdict import Verdict
from monitor.exporters.http import PATHS as HTTP_PATHS
from monitor.exporters.http import REJECT_REASONS
from monitor.gammamap import GAMMA_BIN_LABELS, MIN_EDGE_EVENTS, P_BIN_LABELS
from monitor.gammamap_edges import MODEL_GAMMA_BINS
from monitor.probes.perturbations import PERTURBATION_NAMES
from monitor.probes.probe_report import BUDGET_STATES, REGION_OUTCOMES
from monitor.source.kafka_sink import DROP_REASONS as PRODUCER_DROP_REASONS
from monitor.source.kafka_sink import TOPIC_KINDS
from monitor.source.kserve_join import KSERVE_DROP_REASONS
from monitor.source.validate import INVALID_REASONS, PROCESSING_REASONS
from monitor.telemetry import METRICS, MetricSpec

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "METRICS.md"


@dataclass(frozen=True)
class Usage:
    group: str
    unit: str
    use: str


GROUPS = (
    "Traffic and sampling",
    "Per-event robustness (histograms)",
    "Shadow agreement",
    "Rolling windows and reference",
    "Drift",
    "Alerts",
    "Probes on flagged regions",
    "Accuracy without labels",
    "Candidate beside the served model",
    "With delayed labels",
    "Cost and latency",
    "Process",
)


LABELS: dict[str, str] = {
    "model": "The model's name (`models[].name`; events' `model` field). `unknown` on invalid events that could "
    "not be attributed.",
    "model_version": "The event's `model_version`, else `models[].version`, else `unknown`; at most 128 "
    "characters, control characters removed. Bounded: the `segments.max_versions` (default 8) most recently seen "
    "per model are kept, the least recently seen is evicted with its series "
    "(`harmonic_model_versions_evicted_total`).",
    "segment": "The event's `segment`; bounded: beyond `segments.max_segments` distinct values (or outside "
    "`segments.allowed`) everything folds into `other`.",
    "reason": "Why an event was invalid: "
    + ", ".join(f"`{r}`" for r in (*INVALID_REASONS, *PROCESSING_REASONS))
    + ". Why a KServe half was dropped (`harmonic_kserve_dropped_total`): "
    + ", ".join(f"`{r}`" for r in KSERVE_DROP_REASONS)
    + ". Why the HTTP endpoint refused a request (`harmonic_http_requests_rejected_total`): "
    + ", ".join(f"`{r}`" for r in REJECT_REASONS)
    + ". Why the Kafka producer gave a record up (`harmonic_producer_dropped_total`): "
    + ", ".join(f"`{r}`" for r in PRODUCER_DROP_REASONS)
    + ". Why the prober completed, queued or skipped a region (`harmonic_probe_regions_total`): "
    + ", ".join(f"`{r}`" for reasons in REGION_OUTCOMES.values() for r in reasons)
    + ".",
    "outcome": "What the prober did with a region: "
    + ", ".join(f"`{o}` ({', '.join(f'`{r}`' for r in reasons)})" for o, reasons in REGION_OUTCOMES.items())
    + ".",
    "state": "The probe row budget's account: " + ", ".join(f"`{s}`" for s in BUDGET_STATES) + ".",
    "topic_kind": "Which output topic a producer record was for: "
    + ", ".join(f"`{k}`" for k in TOPIC_KINDS)
    + " (`kafka.dead_letter_topic`, `kafka.scores_topic`).",
    "path": "The HTTP endpoint's path without its slash: " + ", ".join(f"`{p}`" for p in HTTP_PATHS) + ".",
    "purpose": "What model rows were spent on: `events`, `shadow`, `reference`, `probe`.",
    "output": "A regressor's output column, `0` to `15` (the model's outputs concatenated in graph order; columns "
    "beyond 16 are not exported).",
    "scale": "`sigma` (flicker noise scale σ) or `radius` (γ ball radius r).",
    "window": "`<seconds>s` for each of `windows.time_windows_seconds` (default `60s`, `300s`, `3600s`) and "
    "`last_<N>` for the count window (`windows.count_window_events`, default `last_2000`).",
    "verdict": "One of "
    + ", ".join(f"`{v.value}`" for v in Verdict)
    + "; on `harmonic_compare_verdict` one of `candidate-better`, `candidate-worse`, `no-difference`, "
    "`incomparable`.",
    "candidate": "A model with `compare_with` naming the `model` label's model (bounded by the configured models).",
    "axis": "Compared axis: `gamma`, `flicker`, `p_adj`, `confidence` (classifiers; a regressor: `gamma`, `flicker`).",
    "problem": "What was wrong with one input's value: `missing` (absent or null), `not_finite` (NaN, ±inf) or "
    "`out_of_range` (finite but beyond float32's ±3.4e38).",
    "feature": "One of the model's inputs by its per-element name (the model's signature, `x[3]`, `age`, or "
    "`models[].feature_names`); bounded: one per input up to 64 inputs, else the 16 largest and `other`.",
    "signal": "Drift detector: `gamma_cusum`, `gamma_ks`, `flicker_cusum`, `flicker_rate`, `confidence_cusum`, "
    "`confidence_tail_cusum`, `confidence_jump_cusum` and `margin_cusum` (classifiers), `features_ks`.",
    "alertname": "`HarmonicHarmfulShift`, `HarmonicInputDrift`, `HarmonicShadowDisagreement`, `HarmonicAccuracyDrop`.",
    "method": "Label-free accuracy estimator: `harmonic` (ours: confidence, γ, flicker, P_adj), `ac` (average "
    "calibrated confidence), `atc` (average thresholded confidence), `doc` (difference of confidences).",
    "p_bin": "Gamma Map bin of the predicted class's probability: "
    + ", ".join(f"`{b}`" for b in P_BIN_LABELS)
    + " (each `[lo, hi)`, the last closed).",
    "gamma_bin": "Gamma Map bin of γ on the model's own edges, the deciles of its reference's γ and one bin above its "
    f"largest: at most {MODEL_GAMMA_BINS + 1} values per model, each its two-digit index and range (`00:0-0.0000123`, …, "
    "`10:>=0.000871`), sorting in bin order; `00:>=0` alone where γ is 0 on every reference event (a constant "
    f"region). Until the model has a reference, or with one of fewer than {MIN_EDGE_EVENTS} events or written "
    "before it kept its edges, the fixed half-decade grid: " + ", ".join(f"`{b}`" for b in GAMMA_BIN_LABELS) + ".",
    "receiver": "Alert delivery target: `alertmanager` or `webhook`.",
    "region": "Region id in the model's region index (`r1`, `r2`, …); details at `GET /probes`.",
    "perturbation": "Perturbation type τ: " + ", ".join(f"`{p}`" for p in PERTURBATION_NAMES) + ".",
    "status": "A probe target's status in the threshold profile: `crossed`, `not_crossed`, `not_searched`.",
    "version": "harmonic-monitor's version.",
    "loss": "A regressor's error: `mae` (mean absolute) or `rmse` (root mean squared).",
}

HEADER = """\
<!-- Generated by scripts/gen_metrics_doc.py from monitor/telemetry/ METRICS. Do not edit by hand:
     change the declaration in monitor/telemetry/, then run `.venv/bin/python scripts/gen_metrics_doc.py`. -->
# Metrics

harmonic-monitor serves these series at `GET /metrics` on `metrics.port` (default 9108). Alerting and recording
rules over them: [`deploy/prometheus/harmonic-rules.yml`](../deploy/prometheus/harmonic-rules.yml); dashboard:
[`grafana/dashboards/harmonic-overview.json`](../grafana/dashboards/harmonic-overview.json); what to do when
an alert fires: [OPERATIONS.md](OPERATIONS.md).

## Reading them

- **Everything is prefixed `harmonic_`**, counters end in `_total`, durations are in seconds, ratios are 0–1.
- **Sampling.** Every event is scored while scoring fits in `sampler.cpu_share` of the CPUs; above that only a
  sample is (one budget shared by all models: an equal share of CPU time each under overload, and what a model does
  not use goes to the others; `sampler.events_per_second` optionally caps it). Counters of *scored*
  events then count the sample: to estimate live traffic divide by the sampled ratio,
  `rate(harmonic_events_scored_total[5m]) / on (model) group_left () harmonic_events_sampled_ratio`.
  Histograms (γ, flicker, P_adj) and the window gauges describe *distributions* and need no rescaling. The
  default sampler is stratified by the live predicted class, so rare classes are over-represented in the scored
  stream (by at most the sampler's boost factor); set `sampler.stratify: false` when you need the scored
  distribution to mirror the traffic's class mix.
- **Per replica.** Each replica exports what it scored from its share of the topic's partitions. Aggregate
  counters and histogram buckets with `sum`; do not sum window gauges or ratios (use `max`/`avg`, or
  recompute from the counters).
- **Counters survive restarts**: they are persisted in the state directory and restored, so `rate()` sees no
  reset when a sidecar restarts with its state.
- **Cardinality** is bounded: `segment` folds into `other` beyond `segments.max_segments`; `model_version` keeps
  the `segments.max_versions` most recently seen per model (older ones are removed); `region` is bounded
  by `probes.max_regions`; `reason`, `purpose`, `signal`, `verdict`, `perturbation` are fixed vocabularies.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _labels(spec: MetricSpec) -> str:
    return ", ".join(f"`{label}`" for label in spec.labels) or "—"


def _exposed(spec: MetricSpec) -> str:
    if spec.type == "histogram":
        return f"`{spec.name}_bucket{{le}}`, `{spec.name}_sum`, `{spec.name}_count`"
    return f"`{spec.name}`"


def render() -> str:
    """The full text of docs/METRICS.md.

    Raises
    ------
    KeyError
        A series in METRICS has no usage note in its declaration.
    """
    notes = {m.name: Usage(m.group, m.unit, m.use) for m in METRICS if m.use}
    missing = [m.name for m in METRICS if m.name not in notes]
    if missing:
        raise KeyError(
            f"usage notes out of step with METRICS: undocumented {missing}. Give each series its note in its "
            "declaration in monitor/telemetry/ (group=, unit=, use=: how to use the metric)."
        )
    bad_groups = sorted({u.group for u in notes.values()} - set(GROUPS))
    if bad_groups:
        raise KeyError(f"unknown groups {bad_groups}; use one of {GROUPS}")
    used_labels = {label for m in METRICS for label in m.labels}
    if used_labels - set(LABELS):
        raise KeyError(f"labels without a description in LABELS: {sorted(used_labels - set(LABELS))}")

    out = [HEADER, "\n## Labels\n\n| label | values |\n|---|---|\n"]
    out += [f"| `{label}` | {_cell(LABELS[label])} |\n" for label in sorted(used_labels)]
    out.append("\n## Catalogue\n\n| metric | type | labels | unit | meaning |\n|---|---|---|---|---|\n")
    for spec in METRICS:
        out.append(
            f"| [`{spec.name}`](#{spec.name}) | {spec.type} | {_labels(spec)} | {_cell(notes[spec.name].unit)} "
            f"| {_cell(spec.help)} |\n"
        )
    for group in GROUPS:
        specs = [m for m in METRICS if notes[m.name].group == group]
        if not specs:
            continue
        out.append(f"\n## {group}\n")
        for spec in specs:
            usage = notes[spec.name]
            out.append(f"\n### {spec.name}\n\n")
            out.append(f"- **Type:** {spec.type} — exposed as {_exposed(spec)}\n")
            out.append(f"- **Labels:** {_labels(spec)}\n")
            out.append(f"- **Unit:** {usage.unit}\n")
            if spec.buckets:
                out.append(f"- **Buckets (`le`):** {', '.join(f'{b:g}' for b in spec.buckets)}, +Inf\n")
            out.append(f"- **Meaning:** {spec.help}\n")
            out.append(f"\n{usage.use}\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/METRICS.md is not up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(REPO)} is out of date: run .venv/bin/python scripts/gen_metrics_doc.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)} ({len(METRICS)} metrics)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
