"""What the service watches and how it speaks: the ``segments``, ``windows``, ``drift``, ``alerts``, ``probes``,
``labels``, ``accuracy`` and ``metrics`` sections, and the offline probe's funnel (``harmonic-monitor probe``'s flags,
no section of the service's file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from monitor.config_checks import http_url_problem
from monitor.config_fields import StrictSettings, setting_default
from monitor.config_model import ScoringSettings


class SegmentSettings(StrictSettings):
    """Bounds on the identity labels taken from event data: segments and model versions."""

    max_segments: int = Field(20, ge=1, description="Distinct segments per model; the rest fold into 'other'.")
    allowed: tuple[str, ...] | None = Field(None, description="If set, only these segments (others → 'other').")
    max_versions: int = Field(
        8,
        ge=1,
        description="model_version values kept per model: the least recently seen is evicted with its series. Set it "
        "above the number of versions served at once (a canary and its base).",
    )
    reference_column: str | None = Field(
        None,
        description="The column of a CSV reference (with a header) that names each row's segment: each segment is "
        "judged against a baseline from its own rows (the column is not fed to the model). Segments it does not cover, "
        "and every segment without it, learn their baseline from their first warmup_events events.",
    )


class WindowSettings(StrictSettings):
    time_windows_seconds: tuple[Annotated[int, Field(gt=0)], ...] = Field(
        (60, 300, 3600), min_length=1, description="Rolling time windows (distinct spans > 0)."
    )
    count_window_events: int = Field(2000, ge=50, description="Count window size (events).")

    @field_validator("time_windows_seconds")
    @classmethod
    def _distinct_windows(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        repeated = sorted({w for w in v if v.count(w) > 1})
        if repeated:
            raise ValueError(f"{list(v)} repeats {repeated}; list each span once (each window is one series)")
        return v


class DriftSettings(StrictSettings):
    """Detector settings (see monitor/drift/*): γ CUSUM + KS, flicker CUSUM + rate test, confidence CUSUM, margin
    CUSUM, per-feature KS."""

    window: int = Field(1000, ge=50, description="Events in the window compared with the reference.")
    every: int = Field(100, ge=1, description="Run the window tests every N scored events.")
    first_test_events: int = Field(
        200,
        ge=10,
        description="Scored events a segment's window tests need before their first test (at most `window`): a "
        "segment starting, or after a restart, is tested on its first events, its level held at any window size.",
    )
    cusum_quantile: float = Field(0.9, gt=0, lt=1, description="CUSUM watches the rate above this ref quantile.")
    cusum_rate_ratio: float = Field(2.0, gt=1, description="CUSUM is tuned to detect this rate increase.")
    false_alarms_per_million_events: float = Field(
        1.0,
        gt=0,
        lt=1e5,
        description="Stated false-alarm rate of each segment's verdict, every detector together, per 10^6 stationary "
        "events of the segment: each of its k detectors gets rate/k (CUSUM thresholds calibrated on the baseline; a "
        "window test's level per test is min(its alpha, rate/k*every/10^6)); every test's null is a new draw from "
        "the baseline, so it holds at any baseline size.",
    )
    cusum_threshold: float | None = Field(
        None, gt=0, description="Pin the CUSUM threshold (log-likelihood units); None: calibrated for the rate above."
    )
    ks_alpha: float = Field(1e-4, gt=0, lt=1, description="KS significance on γ (false-alarm rate per window test).")
    ks_min_distance: float = Field(0.1, gt=0, lt=1, description="KS effect-size floor on γ.")
    rate_alpha: float = Field(
        1e-4, gt=0, lt=1, description="Flicker rate-test significance (false-alarm rate per window test)."
    )
    rate_min_increase: float = Field(0.01, ge=0, description="Flicker mean must rise at least this much.")
    feature_alpha: float = Field(
        0.01, gt=0, lt=1, description="Per-feature KS: false discovery rate across features (Benjamini–Hochberg)."
    )
    feature_min_distance: float = Field(0.1, gt=0, lt=1, description="Per-feature KS effect-size floor.")
    confidence_detector: bool = Field(
        True,
        description="Classifiers: a CUSUM on 1 − max-probability (a fall in the model's confidence), calibrated like "
        "the γ CUSUM, counts as output-side evidence for harmful-shift. Regressors have none.",
    )
    margin_detector: bool = Field(
        True,
        description="Classifiers: a CUSUM on 1 − margin (margin = top-1 minus top-2 class probability; a fall means "
        "two classes draw closer), calibrated like the γ CUSUM, counts as output-side evidence for harmful-shift. "
        "For a binary model it repeats the confidence CUSUM (margin = 2·max-probability − 1). Regressors have none.",
    )
    confidence_harm: Literal["auto", "always", "never"] = Field(
        "auto",
        description="Whether a fall in confidence or margin (their CUSUMs) is harm evidence. auto: where the "
        "labelled reference (reference --labels) shows the least confident 10 % of its rows wrong often enough that "
        "a fall can cost accuracy.tolerance or more (95 % bound), else it is reported as fragility (input-shift); "
        "without a labelled reference it is harm evidence. always / never: whatever the reference shows.",
    )
    range_min_share: float = Field(
        0.02,
        gt=0,
        lt=1,
        description="Data quality: an input is flagged (input evidence) when at least this share of the last "
        "drift.window events lies outside the reference's range (its k-th smallest to k-th largest of N rows, about "
        "the 0.1–99.9 percentiles), significantly more than a new draw would (beta-binomial; false discovery rate "
        "drift.feature_alpha across inputs, capped by the detector's share of the rate).",
    )
    multivariate_detector: bool = Field(
        True,
        description="A multivariate input test (PCA reconstruction error against the baseline's, 2 to 512 float "
        "inputs): sees a change in how inputs go together (a correlation that flips) that per-input tests miss. "
        "Input evidence only; KS at drift.ks_alpha with the drift.ks_min_distance floor.",
    )
    reference_max_events: int = Field(5000, ge=100, description="Reference rows scored at start-up (sampled).")


class AlertSettings(StrictSettings):
    alertmanager_url: str | None = Field(None, description="e.g. http://alertmanager:9093")
    webhook_url: str | None = Field(None, description="Generic JSON webhook.")
    for_seconds: float = Field(30.0, ge=0, description="Condition must hold this long before firing.")
    resolve_after_seconds: float = Field(60.0, ge=0, description="Hysteresis: clear this long before resolving.")
    repeat_interval_seconds: float = Field(
        14400.0,
        gt=0,
        description="Alertmanager's repeat_interval for webhook_url: a firing alert is POSTed when it fires, then "
        "again no more often than this while it fires, and once when it resolves. Alertmanager itself "
        "(alertmanager_url) is re-sent every 60 s, under its resolve_timeout, as Prometheus does.",
    )
    allowed_lag_seconds: float = Field(
        60.0,
        ge=0,
        description="Alerts run on max(event-time watermark, wall time − this): event time while events arrive "
        "within this of their timestamps; on a quiet stream time goes on this far behind the wall clock, so alerts "
        "resolve; a backlog's old timestamps never resolve them (docs/OPERATIONS.md, Alerts on a quiet stream).",
    )
    max_event_skew_seconds: float = Field(
        300.0,
        gt=0,
        description="A model's clock never runs more than this far ahead of the wall clock (replay: of the "
        "watermark); an event stamped beyond it is placed at the watermark and counted in "
        "harmonic_events_mistimed_total{reason=future_timestamp}: a stray, creeping or fast producer clock cannot "
        "stall windows and alerts.",
    )
    shadow_disagreement_threshold: float = Field(
        0.02, ge=0, le=1, description="Live-vs-ONNX disagreement rate above which HarmonicShadowDisagreement fires."
    )
    runbook_url_base: str = Field(
        "docs/OPERATIONS.md",
        description="Alerts get runbook_url = <base>#<alertname lower-cased>; point it at your hosted copy.",
    )

    @field_validator("alertmanager_url", "webhook_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        problem = None if v is None else http_url_problem(v)  # what the senders refuse, refused at load
        if problem:
            raise ValueError(problem)
        return v


class ProbeSettings(StrictSettings):
    enabled: bool = Field(True, description="Run threshold probes on flagged regions.")
    interval_seconds: float = Field(300.0, gt=0, description="How often the probe scheduler wakes.")
    max_regions: int = Field(16, ge=1, description="Bounded region index size per model (lowest rank evicted).")
    regions_per_run: int = Field(3, ge=1, description="Highest-ranked regions probed (or queued) per run.")
    budget_share: float = Field(0.1, gt=0, le=1, description="Max share of model evaluations used by probes.")


class FunnelSettings(StrictSettings):
    """The probe funnel on one region (:class:`monitor.probes.funnel.FunnelConfig`; ``harmonic-monitor probe``'s
    flags). Not a section of the service's file: the service's prober (``probes``) runs a cheaper funnel of its own,
    ``FunnelConfig(steps=5)`` without the γ-ascent direction, searching every target (monitor/probes/scheduler.py).
    Intensities are in standardized units (raw with ``space: raw``)."""

    eps: float = Field(0.1, description="Moderate intensity of the MRI, the sensitivity stage and consistency.")
    mri_cut: float = Field(0.9, description="Targets with MRI r below this are examined (sensitivity stage).")
    sensitivity_cut: float = Field(
        0.01, description="A (target, output) pair is fragile when its sensitivity S/scale reaches this."
    )
    sensitivity_draws: int = Field(4, description="Sensitivity draws per stochastic perturbation.")
    delta: float = Field(0.2, description="Threshold search: the tolerated drop δ of the agreement rate P(ε).")
    eps_max: float = Field(8.0, description="Threshold search cap: the range grows up to [0, ε_max].")
    eps_start: float | None = Field(
        1.0,
        description="Threshold search range starts at [0, ε_start] and doubles until P(ε) crosses or ε_max is "
        "reached; ε_start at ε_max or above (or none) searches one fixed range.",
    )
    eta: float = Field(0.01, description="Threshold search resolution η.")
    radius: float = Field(
        setting_default(ScoringSettings, "radius"),
        description="γ ball radius r of the gamma_ascent perturbation and Algorithm 2 (scoring.radius's default).",
    )
    ball: str = Field(
        setting_default(ScoringSettings, "ball"),
        description="γ ball of the gamma_ascent perturbation and Algorithm 2: simplex | simplex+anti | rotations:K | "
        "hypercube:m | auto.",
    )
    steps: int = Field(
        10,
        description="Algorithm 2 (γ-ascent adversarial search) steps N per point; 0 skips it. Not scoring.steps "
        "(P_adj's N): another N. The service's prober runs 5.",
    )
    seed: int = Field(setting_default(ScoringSettings, "seed"), description="Seed of every random draw.")
    consistency_tolerance: float = Field(
        0.1, description="Regressors' consistency: |Δ| ≤ tolerance·scale counts as the same output."
    )
    search_all: bool = Field(
        True,
        description="Threshold search on every target (the full threshold profile); false: the cheap screen, only "
        "on targets fragile at eps (the others reported not_searched, robust_at_eps). The service's prober searches "
        "every target.",
    )


class ProbeRunSettings(StrictSettings):
    """What an offline probe runs beyond the funnel (:class:`monitor.probes.offline.ProbeOptions`;
    ``harmonic-monitor probe``'s flags)."""

    l2_boundary: bool = Field(
        False,
        description="Also search each point's nearest class boundary in L2 (black box, ~(n+1)·8 model rows per point "
        "for n features), reported beside the single-feature ε*.",
    )
    certify_copies: int = Field(
        32,
        description="Certified radius (randomized smoothing): Gaussian copies per point for a classifier, B·K model "
        "rows; 0 skips it.",
    )
    certify_sigma: float = Field(0.05, description="Noise scale σ of the certified radius.")
    certify_alpha: float = Field(0.001, description="1 − confidence of p_lower (the certified radius).")
    certify_select: int = Field(
        0,
        description="Copies that select the class (their majority), apart from those that estimate it; 0 selects "
        "the clean class.",
    )
    bisect_trees: bool = Field(
        False,
        description="Bisect single-feature shifts of a tree ensemble too, instead of reading ε* exactly from its "
        "splits.",
    )


class LabelSettings(StrictSettings):
    """Delayed labels (kafka.labels_topic): accuracy, resilience, ECE/reliability, composite."""

    ttl_seconds: float = Field(86400.0, gt=0, description="How long a scored prediction waits for its label.")
    max_predictions: int = Field(100_000, ge=1, description="Bound on predictions waiting for labels.")
    window_events: int = Field(2000, ge=10, description="Joined labels the quality figures are computed over.")
    noise_sigma: float = Field(0.1, gt=0, description="σ of the noisy copy behind Resilience (standardized).")


class AccuracySettings(StrictSettings):
    """Label-free accuracy estimates for a model whose reference JSON holds ``accuracy_estimator``
    (``harmonic-monitor reference --labels``); docs/OPERATIONS.md, "Accuracy without labels"."""

    method: Literal["auto", "harmonic", "ac", "atc", "doc", "iw", "iw_atc"] = Field(
        "auto",
        description="Primary method: the one HarmonicAccuracyDrop reads (every method is exported). Default auto: "
        "iw (importance-weighted from a domain classifier on the inputs) where the rows are at hand (estimate, the "
        "API), atc where only scores are (run): each the best measured in its case (docs/BENCHMARKS.md).",
    )
    tolerance: float = Field(
        0.05,
        ge=0,
        le=1,
        description="HarmonicAccuracyDrop fires when the primary method's 90 % upper bound on the count window is "
        "below the reference accuracy minus this.",
    )
    interval_seconds: float = Field(
        15.0,
        ge=0,
        description="Estimates are recomputed at most this often per model (clock seconds; 0 = every "
        "evaluation). One estimate of a 2000-event window costs ~20 ms.",
    )
    sample_events: int = Field(
        1000, ge=50, description="Events each time window keeps for the estimate (a uniform sample per bucket)."
    )
    min_events: int = Field(
        100, ge=1, description="HarmonicAccuracyDrop needs at least this many events in the count window."
    )
    error_tolerance: float = Field(
        0.1,
        ge=0,
        description="Regressors (a reference built with true values): HarmonicErrorRise fires when the 90 % lower "
        "bound of the estimated MAE on the count window exceeds the reference MAE × (1 + this).",
    )


class MetricsSettings(StrictSettings):
    """The HTTP endpoint (/metrics, /healthz, /readyz, /probes) and its limits; docs/OPERATIONS.md, "HTTP endpoint"."""

    host: str = Field("0.0.0.0", description="Address the HTTP endpoint listens on.")
    port: int = Field(
        9108,
        ge=0,
        le=65535,
        description="Port of /metrics, /healthz, /readyz and /probes; 0 = pick a free port (tests).",
    )
    min_render_interval_seconds: float = Field(
        1.0, gt=0, le=60, description="/metrics is rendered at most once per this interval; scrapers share the bytes."
    )
    read_timeout_seconds: float = Field(
        5.0, gt=0, description="A request head must arrive within this of connecting (or of the last response)."
    )
    write_timeout_seconds: float = Field(10.0, gt=0, description="A response must drain to the client within this.")
    max_connections: int = Field(
        512, ge=1, description="Open connections; a new one beyond closes the longest-waiting idle or half-open one."
    )
    max_concurrent_scrapes: int = Field(
        16, ge=1, description="/metrics requests in flight (more: 503) and responses per render (more wait)."
    )
    workers: int = Field(4, ge=1, description="Threads that run /readyz and /probes; twice as many queued, then 503.")
    web_config_file: Path | None = Field(
        None,
        description="TLS and basic auth: a web config file in the Prometheus exporter-toolkit's format "
        "(deploy/web-config.example.yml). None: plain HTTP, no auth. /healthz stays open to probes.",
    )
