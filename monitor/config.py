"""Configuration: pydantic models per stage, loaded from YAML, ``HARMONIC_*`` variables and CLI flags.

Precedence: CLI flag > environment > YAML file > default. Unknown keys anywhere are errors that name the key.
Nested environment variables use ``__``: ``HARMONIC_KAFKA__BOOTSTRAP_SERVERS=broker:9092``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from monitor.config_checks import TOPIC_INPUTS, TOPIC_OUTPUTS, bootstrap_problem, http_url_problem, topic_loop_problem
from monitor.cpus import available_cpus
from monitor.errors import ConfigError
from monitor.logs import is_secret_name, redact, redact_text
from monitor.source.kafka import (
    FETCH_MAX_WAIT_MS,
    MAX_PARTITION_FETCH_BYTES,
    PRODUCER_BUFFER_BYTES,
    PRODUCER_DELIVERY_TIMEOUT_MS,
)

#: what no string setting may hold: control characters (NUL included), U+2028/9 and lone surrogates (an undecodable byte in an
#: environment variable, a "\ud800" escape in YAML): names and versions become metric labels, paths reach the OS
_UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _printable(value: Any) -> Any:
    """``value`` when every string in it (dict keys and values, tuple items, paths) is printable UTF-8 text."""
    texts = [value] if isinstance(value, str | Path) else []
    if isinstance(value, tuple | list):
        texts = [v for v in value if isinstance(v, str | Path)]
    elif isinstance(value, dict):
        texts = [t for kv in value.items() for t in kv if isinstance(t, str | Path)]
    for text in texts:
        found = _UNSAFE_TEXT.search(str(text))
        if found:
            raise ValueError(
                f"{str(text)!r} holds {found.group()!r}, a control character or a byte that is not UTF-8; "
                "expected printable UTF-8 text (check the file's encoding and the variable's value)"
            )
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf passes gt=0: refuse it

    _printable_text = field_validator("*")(_printable)


def setting_field(model: type[BaseModel], name: str) -> FieldInfo:
    """The declaration of setting ``name`` of ``model``: a :class:`KeyError` that names the model's fields when there
    is none (a renamed setting fails where it is read, at import)."""
    try:
        return model.model_fields[name]
    except KeyError:
        raise KeyError(f"{model.__name__} has no setting {name!r}; it has {', '.join(model.model_fields)}") from None


def setting_default(model: type[BaseModel], name: str) -> Any:
    """The default of setting ``name`` of ``model`` (a default factory called): the value a library config, a
    keyword or a flag takes where it stands for this setting, so that the default is written once, here."""
    return setting_field(model, name).get_default(call_default_factory=True, validated_data={})


def setting_description(model: type[BaseModel], name: str) -> str:
    """The description of setting ``name`` of ``model`` (every setting has one)."""
    description = setting_field(model, name).description
    if not description:
        raise KeyError(f"{model.__name__}.{name} has no description")
    return description


class ScoringSettings(_Strict):
    radius: float = Field(0.05, gt=0, description="Ball radius r (standardized units unless space=raw).")
    space: Literal["standardized", "raw"] = Field("standardized", description="Units of radius and sigma.")
    scale: Literal["per_feature", "global", "per_channel"] = Field(
        "per_feature",
        description="How standardized units are fitted: each feature its own mean and scale, one for all features "
        "(images in pixel-value units relative to their spread), or one per image channel (see channel_axis).",
    )
    channel_axis: int = Field(
        1, description="With scale: per_channel, the channel axis of an image input's shape: 1 for NCHW, -1 for NHWC."
    )
    ball: str = Field(
        "auto",
        description="simplex | simplex+anti | rotations:K | hypercube:m | auto (simplex+anti up to 256 features, "
        "hypercube beyond: m = 0.1 % of 2n, at least 16, drawn per event).",
    )
    output: Literal["auto", "proba", "logit", "label", "value"] = Field(
        "auto", description="What f is for γ (auto: proba for classifiers, value for regressors)."
    )
    flicker_copies: int = Field(32, ge=0, description="Gaussian copies per event (K); 0 turns flicker off.")
    sigma: float = Field(0.05, gt=0, description="Flicker noise scale σ.")
    scales: Literal["fixed", "from_reference"] = Field(
        "from_reference",
        description="from_reference: score at the σ and r a reference JSON records (built with `reference --scales "
        "from-reference`: σ at which a stated share of reference events flickers, r = σ); a reference that records "
        "none (a CSV, a warm-up, a JSON built at fixed scales) scores at radius and sigma. radius or sigma set here "
        "explicitly win over the recorded ones. fixed: always radius and sigma. (`reference --scales` defaults to fixed: "
        "a reference chooses its scales only when asked.)",
    )
    steps: int = Field(
        25,
        ge=0,
        description="N in P_adj = P·exp(−N·γ_logit). Not the N of `probe --steps` (Algorithm 2's steps per point).",
    )
    seed: int = Field(0, description="Seeds ball rotations/samples and flicker noise.")
    regression_tolerance: float = Field(
        0.1,
        gt=0,
        description="Regressor flicker: a copy flips when its output moves by more than this fraction of the output's "
        "reference IQR (harmonic_flicker_tolerance gives it in output units; docs/SPEC-NOTES.md).",
    )


class ModelSettings(_Strict):
    name: str = Field(..., min_length=1, description="Model name as it appears in events' `model` field.")
    path: Path = Field(..., description="The ONNX file.")
    model_kind: Literal["auto", "classifier", "regressor"] = Field(
        "auto",
        description="Classifier or regressor: auto decides from the graph (Softmax, ArgMax, label output, ZipMap; "
        "the load log says what it decided and why); set it when a float [N, C] output holds logits the graph "
        "does not mark.",
    )
    fixed_features: list[str] = Field(
        default_factory=list,
        description="Float features held fixed like int and string inputs (copied unchanged to every ball point, "
        "noise copy and probe row): element names (x[3]) or input names (all their elements). For one-hot columns "
        "and counts stored as float. See docs/MODELS.md.",
    )
    version: str = Field("", description="Label model_version when events carry none.")
    reference: Path | None = Field(
        None,
        description="A reference JSON built by `harmonic-monitor reference` (recommended: scales, baselines, "
        "category tables), or reference rows (.csv/.npy/.npz); else a warm-up window.",
    )
    feature_names: tuple[str, ...] | None = Field(None, description="Order for events whose features are a map.")
    reference_header: Literal["auto", "yes", "no"] = Field(
        "auto",
        description="Is the first row of a CSV reference a header? auto: when it is not the same kind as the rows "
        "below it (names above numbers, or column numbers above fractional rows); yes: always; no: never.",
    )
    warmup_events: int = Field(2000, ge=10, description="Warm-up window size when no reference is given.")
    providers: tuple[str, ...] = Field(
        ("cpu",),
        description="onnxruntime execution providers, in order: cpu, cuda, tensorrt or full provider names; CPU is "
        "always appended as the fallback ([cuda, cpu] runs on CPU with one warning without onnxruntime-gpu).",
    )
    threads: int = Field(
        0,
        ge=0,
        description="onnxruntime intra-op threads (0 = onnxruntime's default, capped by the container's cgroup CPU "
        "quota; the offline commands at 0: one thread per run, each run cut into a part per CPU, run at once).",
    )
    max_rows_per_run: int = Field(16384, ge=1, description="Rows per session.run chunk (16384 measured best).")
    rows_in_graph: bool = Field(
        True,
        description="Let onnxruntime build the ball points and flicker copies (a wrapped copy of the graph, checked "
        "against the model at load); false builds them in numpy (slower; for graphs the wrapper mishandles).",
    )
    scoring: ScoringSettings = Field(
        default_factory=ScoringSettings, description="How γ and flicker are scored for this model."
    )
    compare_with: str | None = Field(
        None,
        description="Make this model a candidate beside the named model (the one it would replace): scored on that "
        "model's sampled events (one draw, both models; the sampling budget counts both), at its scales, never "
        "served; exports paired differences and harmonic_compare_verdict (docs/COMPARE.md). Same inputs, kind and "
        "classes as the named model.",
    )


class KafkaSettings(_Strict):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Comma-separated host:port list.")
    topic: str = Field("inference-events", min_length=1, description="Topic with inference events.")
    group_id: str = Field("harmonic-monitor", min_length=1, description="Consumer group (replicas share it).")
    api_version: str | None = Field(None, description="Broker API version, e.g. '0.9' or '2.8'; default: probe.")
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "earliest", description="Where a new consumer group starts reading."
    )
    session_timeout_ms: int = Field(10000, ge=1000, description="Consumer-group session timeout.")
    max_poll_records: int = Field(2000, ge=1, description="Records per poll.")
    fetch_max_wait_ms: int = Field(
        FETCH_MAX_WAIT_MS,
        ge=0,
        description="How long the broker may hold a fetch that has no new data yet. Some brokers (Tansu) hold it for "
        "the whole wait even when records arrive meanwhile: at kafka-python's default 500 ms records reached the "
        "sidecar ~160 ms later at the median (docs/BENCHMARKS.md, latency).",
    )
    max_partition_fetch_bytes: int = Field(
        MAX_PARTITION_FETCH_BYTES,
        ge=1024,
        description="Most bytes fetched per partition per request (kafka-python's default, 1 MiB).",
    )
    lean_record_parse: bool = Field(
        True,
        description="Parse fetched v2 record batches with the consumer's own lean loop (monitor/source/records.py: "
        "the same records, positions and errors as kafka-python's parse, at less CPU per record); it is used only "
        "with a kafka-python release it was checked against, and false keeps kafka-python's own parse.",
    )
    dead_letter_topic: str | None = Field(None, description="Invalid events go here with the reason in a header.")
    scores_topic: str | None = Field(None, description="Optional: per-event scores are published here.")
    labels_topic: str | None = Field(None, description="Optional: delayed labels {id,label,ts}.")
    producer_buffer_bytes: int = Field(
        PRODUCER_BUFFER_BYTES,
        ge=1 << 16,
        description="Bytes of dead letters and scores kept until the broker acknowledges them. While the broker is "
        "away they wait here and are re-sent; when it is full the pipeline stops reading (back-pressure) until they "
        "are delivered, unless producer_drop_when_full.",
    )
    producer_drop_when_full: bool = Field(
        False,
        description="true: dead letters and scores beyond producer_buffer_bytes are dropped and counted "
        "(harmonic_producer_dropped_total) and the pipeline keeps reading; false: it pauses until they are delivered.",
    )
    producer_delivery_timeout_ms: int = Field(
        PRODUCER_DELIVERY_TIMEOUT_MS,
        ge=1000,
        description="kafka-python's delivery_timeout_ms: how long it tries one record before reporting it failed "
        "(harmonic_producer_failures_total); the sidecar then sends it again: nothing is given up while the broker "
        "is away.",
    )
    security: dict[str, str | int | bool] = Field(
        default_factory=dict,
        description="Passed through to kafka-python: security_protocol, ssl_cafile, sasl_mechanism, ..., e.g. "
        "{security_protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, sasl_plain_username: harmonic}; give the password "
        "in HARMONIC_KAFKA__SECURITY__SASL_PLAIN_PASSWORD rather than in the file.",
    )
    consumer_process: bool | None = Field(
        None,
        description="Run the consumer, either client, in a child process that fetches (librdkafka's also decodes "
        "events ahead), so that reading and the pipeline use two cores (monitor/source/kafka_process.py); default: when 2 or more CPUs are "
        "available (CPU affinity, capped by the container's cgroup CPU quota).",
    )

    client: Literal["kafka-python", "librdkafka"] = Field(
        "kafka-python",
        description="Kafka client library: kafka-python (pure Python) or librdkafka (confluent-kafka: fetching, "
        "parsing and producing in C threads; no lean_record_parse). The same delivery "
        "contract either way: offsets committed only after the state is saved; security takes kafka-python's names "
        "or librdkafka's dotted ones.",
    )

    def use_consumer_process(self) -> bool:
        if self.consumer_process is not None:
            return self.consumer_process
        return available_cpus() >= 2  # the container's CPU quota counts, not only the node's cores

    @field_validator("api_version", mode="before")
    @classmethod
    def _api_version_is_dotted(cls, v: object) -> object:
        # validated at load so that check-config catches it, not the first Kafka connection; a YAML number is refused
        # because YAML reads 2.10 as 2.1
        if isinstance(v, int | float) and not isinstance(v, bool):
            raise ValueError(f"write the version as a quoted string, e.g. api_version: '{v}' (YAML reads 2.10 as 2.1)")
        if isinstance(v, str) and not _API_VERSION.fullmatch(v):
            raise ValueError(f"{v!r} is not a version like '0.9' or '2.8.1'")  # repr: v may hold a surrogate
        return v

    @field_validator("bootstrap_servers")
    @classmethod
    def _brokers_are_addresses(cls, v: str) -> str:
        problem = bootstrap_problem(v)  # run would otherwise fail inside the client, after the models load
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _no_feedback_loop(self) -> KafkaSettings:
        problem = topic_loop_problem({name: getattr(self, name) for name in (*TOPIC_OUTPUTS, *TOPIC_INPUTS)})
        if problem:
            raise ValueError(problem)
        return self

    def api_version_tuple(self) -> tuple[int, ...] | None:
        return None if self.api_version is None else _parse_api_version(self.api_version)


_API_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")


def _parse_api_version(text: str) -> tuple[int, ...]:
    """``"0.9"`` → ``(0, 9)``; raises :class:`ConfigError` for anything else.

    >>> _parse_api_version("2.8.1")
    (2, 8, 1)
    """
    if not _API_VERSION.fullmatch(text):
        raise ConfigError(f"kafka.api_version '{text}' is not like '0.9' or '2.8.1'")
    return tuple(int(p) for p in text.split("."))


class SamplerSettings(_Strict):
    events_per_second: float | None = Field(
        None,
        ge=0,
        description="Optional cap on scored events/s, one budget shared by all models, an equal share each under "
        "overload (max-min fairness: what a model does not use goes to the others); unset (the default) = no cap, "
        "the CPU share alone decides; 0 = score every event (no sampling, no CPU limit).",
    )
    cpu_share: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Share of the available CPUs (affinity capped by the cgroup CPU quota) that scoring may take, at "
        "most: ingest first, the budget is cut to what ingest leaves while the consumer lags (a backlog is read at "
        "~0.9 of the scoring-off rate) and climbs back to this cap once caught up. Every event is scored while the "
        "measured scoring cost fits in the budget; above, events are sampled uniformly, one budget shared by all "
        "models (an equal share of CPU time each under overload).",
    )
    burst_seconds: float = Field(
        2.0,
        gt=0,
        description="Bucket depth in seconds of budget (CPU share and cap): a burst this size is scored whole.",
    )
    stratify: bool = Field(True, description="Class-stratified acceptance on the live predicted class.")


class BatchSettings(_Strict):
    max_events: int = Field(256, ge=1, description="Micro-batch size B.")
    max_wait_ms: int = Field(200, ge=1, description="Flush a partial batch after this long.")


class SegmentSettings(_Strict):
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


class WindowSettings(_Strict):
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


class DriftSettings(_Strict):
    """Detector settings (see monitor/drift/*): γ CUSUM + KS, flicker CUSUM + rate test, confidence CUSUM, margin
    CUSUM, per-feature KS."""

    window: int = Field(1000, ge=50, description="Events in the window compared with the reference.")
    every: int = Field(100, ge=1, description="Run the window tests every N scored events.")
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


class AlertSettings(_Strict):
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


class ProbeSettings(_Strict):
    enabled: bool = Field(True, description="Run threshold probes on flagged regions.")
    interval_seconds: float = Field(300.0, gt=0, description="How often the probe scheduler wakes.")
    max_regions: int = Field(16, ge=1, description="Bounded region index size per model (lowest rank evicted).")
    regions_per_run: int = Field(3, ge=1, description="Highest-ranked regions probed (or queued) per run.")
    budget_share: float = Field(0.1, gt=0, le=1, description="Max share of model evaluations used by probes.")


class FunnelSettings(_Strict):
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


class ProbeRunSettings(_Strict):
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


class LabelSettings(_Strict):
    """Delayed labels (kafka.labels_topic): accuracy, resilience, ECE/reliability, composite."""

    ttl_seconds: float = Field(86400.0, gt=0, description="How long a scored prediction waits for its label.")
    max_predictions: int = Field(100_000, ge=1, description="Bound on predictions waiting for labels.")
    window_events: int = Field(2000, ge=10, description="Joined labels the quality figures are computed over.")
    noise_sigma: float = Field(0.1, gt=0, description="σ of the noisy copy behind Resilience (standardized).")


class AccuracySettings(_Strict):
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


class MetricsSettings(_Strict):
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


class Settings(BaseSettings):
    """Everything ``harmonic-monitor run`` needs."""

    model_config = SettingsConfigDict(
        env_prefix="HARMONIC_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
        allow_inf_nan=False,
    )

    _printable_text = field_validator("*")(_printable)

    models: tuple[ModelSettings, ...] = Field(default=(), description="Models watched by this process.")
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    sampler: SamplerSettings = Field(default_factory=SamplerSettings)
    batch: BatchSettings = Field(default_factory=BatchSettings)
    segments: SegmentSettings = Field(default_factory=SegmentSettings)
    windows: WindowSettings = Field(default_factory=WindowSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    probes: ProbeSettings = Field(default_factory=ProbeSettings)
    labels: LabelSettings = Field(default_factory=LabelSettings)
    accuracy: AccuracySettings = Field(default_factory=AccuracySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    state_dir: Path = Field(Path("state"), description="Where state survives restarts; give each replica its own.")
    checkpoint_seconds: float = Field(
        5.0,
        ge=0,
        description=(
            "How often the state is written (fsynced) and, right after, the offsets it covers are committed: the "
            "most a crash re-reads. 0 checkpoints after every micro-batch (tests; costs an fsync per batch)."
        ),
    )
    max_event_bytes: int = Field(1 << 20, ge=64, description="Larger events are invalid (too_large).")
    shutdown_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="Bound on a graceful SIGTERM exit; keep it below the pod's terminationGracePeriodSeconds.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Least severe level logged.")
    log_format: Literal["plain", "json"] = Field(
        "plain", description="Log lines as plain text or one JSON object each."
    )

    @field_validator("models")
    @classmethod
    def _unique_names(cls, v: tuple[ModelSettings, ...]) -> tuple[ModelSettings, ...]:
        names = [m.name for m in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique; repeated: {sorted(dup)}")
        for m in v:
            if m.compare_with is None:
                continue
            target = next((t for t in v if t.name == m.compare_with), None)
            if target is None:
                raise ValueError(
                    f"model '{m.name}': compare_with names '{m.compare_with}', which is not a configured model "
                    f"({', '.join(names)}); name the model it would replace"
                )
            if target.name == m.name or target.compare_with is not None:
                raise ValueError(
                    f"model '{m.name}': compare_with must name a served model (one without compare_with); "
                    f"'{target.name}' is {'itself' if target.name == m.name else 'a candidate too'}"
                )
        return v

    @model_validator(mode="after")
    def _needs_a_model(self) -> Settings:
        if not self.models:
            raise ValueError("no model configured: pass --model M.onnx or list `models:` in the config file")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # flags (init) > environment > YAML file (load_settings passes its data in _FILE_DATA) > field defaults
        return (init_settings, env_settings, _DictSource(settings_cls, _FILE_DATA.get() or {}))


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file '{path}' does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file '{path}' is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    # ValueError: a value YAML's resolver takes for a date but is none (2026-13-45); RecursionError: deep nesting
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigError(f"config file '{path}' is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{path}' must be a mapping at the top level; got {type(data).__name__}")
    odd = [key for key in data if not isinstance(key, str)]
    if odd:
        raise ConfigError(f"config file '{path}' has top-level key {odd[0]!r}; expected setting names such as 'models'")
    return data


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _format_validation(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key '{loc}' (check spelling; see `harmonic-monitor check-config --help`)")
        elif err["type"] == "value_error":
            # our validators' messages already name the value; drop pydantic's "Value error, " prefix
            lines.append(f"'{loc}': {err.get('ctx', {}).get('error', err['msg'])}")
        else:
            got = err.get("input")
            secret = next((str(part) for part in err["loc"] if is_secret_name(str(part))), "")
            shown = "" if isinstance(got, dict | list) else f"; got {redact(got, secret)!r}"
            lines.append(f"'{loc}': {err['msg']}{shown}")
    # one problem: one line; several: one line each under the heading. No secret in an error message
    joined = lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines)
    return redact_text("invalid configuration: " + joined)


def load_settings(config_file: str | Path | None = None, flags: dict[str, Any] | None = None) -> Settings:
    """Build :class:`Settings` from an optional YAML file, the environment and flag overrides.

    ``flags`` is a nested dict of values given on the command line (None values are ignored). Environment
    variables override the file; flags override both.
    """
    _check_environment(os.environ)
    file_data = _read_yaml(Path(config_file)) if config_file else {}
    overrides = _prune(flags or {})
    token = _FILE_DATA.set(file_data)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc)) from exc
    except UnicodeEncodeError as exc:  # a validator quoted a lone surrogate; pydantic cannot carry that message
        raise ConfigError(
            "invalid configuration: a setting holds a lone surrogate (a '\\udXXX' escape in YAML, or a byte that is "
            "not UTF-8 in a HARMONIC_* variable); expected printable UTF-8 text"
        ) from exc
    except SettingsError as exc:  # a HARMONIC_* variable of a list or section setting that is not JSON
        raise ConfigError(
            f"{exc}: a list or section setting given as an environment variable must be JSON, e.g. "
            """HARMONIC_MODELS='[{"name": "credit", "path": "credit.onnx"}]'"""
        ) from exc
    finally:
        _FILE_DATA.reset(token)


#: the YAML file's data while load_settings builds its Settings: the layer under the environment (a context
#: variable: concurrent loads stay apart; a subclass built per call for it cost 2 ms of the 3.5 a load took)
_FILE_DATA: ContextVar[dict[str, Any] | None] = ContextVar("_FILE_DATA", default=None)


#: HARMONIC_* variables that are read outside the settings model
NON_SETTING_VARIABLES = frozenset({"HARMONIC_MALLOC_TUNING", "HARMONIC_GC_TUNING"})


def _check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a ``HARMONIC_*`` variable that names no setting (pydantic-settings would silently ignore it).

    The classic slip is a single underscore where a nested key needs two: ``HARMONIC_KAFKA_BOOTSTRAP_SERVERS``
    is ignored and the sidecar connects to the default broker. Unknown keys *inside* a section
    (``HARMONIC_KAFKA__TOPICC``) are caught by the model's ``extra="forbid"``.
    """
    sections = set(Settings.model_fields)
    for key in sorted(environ):
        if not key.upper().startswith("HARMONIC_") or key.upper() in NON_SETTING_VARIABLES:
            continue
        top = key[len("HARMONIC_") :].lower().split("__", 1)[0]
        if top in sections:
            continue
        hint = ""
        for section in sorted(sections, key=len, reverse=True):
            if top.startswith(section + "_"):
                nested = key[: len("HARMONIC_") + len(section)] + "__" + key[len("HARMONIC_") + len(section) + 1 :]
                hint = f"; nested keys take a double underscore: {nested.upper()}"
                break
        raise ConfigError(
            f"unknown environment variable '{key}': there is no setting '{top}'{hint} "
            f"(top-level settings: {', '.join(sorted(sections))})"
        )


class _DictSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def _prune(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            sub = _prune(v)
            if sub:
                out[k] = sub
        elif v is not None:
            out[k] = v
    return out


def merge_flags(base: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge flag overrides into a nested dict (exposed for tests)."""
    return _deep_merge(base, _prune(flags))
