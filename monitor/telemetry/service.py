"""The process, the candidate beside the served model, and the HTTP endpoint."""

from __future__ import annotations

from monitor.telemetry.series import (
    SECONDS_BUCKETS,
    Counter,
    Gauge,
    Histogram,
    ModelCandidate,
    ModelCandidateSegmentVerdict,
    ModelCandidateSegmentWindow,
    ModelCandidateSegmentWindowAxis,
    NoLabels,
    Path,
    Reason,
    Version,
)

__all__ = [
    "UP",
    "READY",
    "COMPARE_EVENTS",
    "COMPARE_DIFFERENCE",
    "COMPARE_DIFFERENCE_LOWER",
    "COMPARE_DIFFERENCE_UPPER",
    "COMPARE_DISAGREEMENT_RATIO",
    "COMPARE_VERDICT",
    "COMPARE_CANDIDATE_UP",
    "DEGRADED",
    "HTTP_REQUESTS_TOTAL",
    "HTTP_REQUESTS_REJECTED_TOTAL",
    "HTTP_RENDER_DURATION_SECONDS",
]

UP = Gauge(
    "harmonic_up",
    "1 while the process runs; labels describe the build.",
    Version,
    group="Process",
    unit="1",
    use=(
        "Always 1 while the process runs; the `version` label tells which build is deployed "
        "(`count by (version) (harmonic_up)` during a rollout). Its absence is alert HarmonicSidecarAbsent."
    ),
)
READY = Gauge(
    "harmonic_ready",
    "1 when every model is loaded and partitions are assigned.",
    NoLabels,
    group="Process",
    unit="1 ready / 0 not",
    use=(
        "Mirrors `/readyz`: every model loaded and at least one Kafka partition assigned. 0 on a replica beyond "
        "the partition count is expected (it idles); 0 everywhere is alert HarmonicNotReady. Set when `/readyz` "
        "is probed."
    ),
)
COMPARE_EVENTS = Gauge(
    "harmonic_compare_events",
    "Sampled events of the window scored on both the served model and its candidate (models[].compare_with).",
    ModelCandidateSegmentWindow,
    group="Candidate beside the served model",
    unit="events",
    use=(
        "Paired events in the window (both models valid, the windows' uniform share); a window is compared from 50 on. "
        "The newest 20,000 per segment are kept."
    ),
)
COMPARE_DIFFERENCE = Gauge(
    "harmonic_compare_difference",
    "Paired difference of the window means, candidate − served model, on the same sampled events (axis: gamma, "
    "flicker, p_adj, confidence).",
    ModelCandidateSegmentWindowAxis,
    group="Candidate beside the served model",
    unit="the axis's unit",
    use=(
        "Candidate − served on the same events: above 0 on `gamma`/`flicker` means the candidate is more fragile "
        "there; on `p_adj`/`confidence`, higher for the candidate. Read it with its interval (docs/COMPARE.md, Live)."
    ),
)
COMPARE_DIFFERENCE_LOWER = Gauge(
    "harmonic_compare_difference_lower",
    "Lower end of the paired difference's 90 % paired interval (normal, from the per-event differences).",
    ModelCandidateSegmentWindowAxis,
    group="Candidate beside the served model",
    unit="the axis's unit",
    use="An interval wholly above or below 0 is a difference the paired interval calls real at 90 %.",
)
COMPARE_DIFFERENCE_UPPER = Gauge(
    "harmonic_compare_difference_upper",
    "Upper end of the paired difference's 90 % paired interval (normal, from the per-event differences).",
    ModelCandidateSegmentWindowAxis,
    group="Candidate beside the served model",
    unit="the axis's unit",
    use="Upper end of the same interval.",
)
COMPARE_DISAGREEMENT_RATIO = Gauge(
    "harmonic_compare_disagreement_ratio",
    "Share of the window's paired events where the served model and the candidate predict different classes.",
    ModelCandidateSegmentWindow,
    group="Candidate beside the served model",
    unit="ratio (0–1)",
    use=(
        "How often replacing the served model would change the answer (classifiers): what a rollout changes, "
        "whichever model is right."
    ),
)
COMPARE_VERDICT = Gauge(
    "harmonic_compare_verdict",
    "1 for the candidate's current comparison verdict over the longest time window (candidate-better, "
    "candidate-worse, no-difference, incomparable), 0 for the others; separate from harmonic_drift_verdict.",
    ModelCandidateSegmentVerdict,
    group="Candidate beside the served model",
    unit="0/1",
    use=(
        "The Pareto statement over the ranked axes (γ, flicker, P_adj) of the longest window: `candidate-worse` "
        "fires HarmonicCandidateWorse; `incomparable` means each model wins somewhere (no composite score)."
    ),
)
COMPARE_CANDIDATE_UP = Gauge(
    "harmonic_compare_candidate_up",
    "1 while the candidate's file is loaded and compared with the served model, 0 while it is refused (its file "
    "replaced by one that is gone, unreadable or no longer fits the served model).",
    ModelCandidate,
    group="Candidate beside the served model",
    unit="1 compared / 0 refused",
    use=(
        "A candidate's file replaced while `run` runs is loaded again within about 2 s and its comparison starts "
        "afresh (its paired differences, disagreement and verdict go until its windows fill again); one that "
        "does not fit is "
        "refused until a file that does replaces it. `/readyz` `candidate_files` says why (docs/COMPARE.md, Live)."
    ),
)
DEGRADED = Gauge(
    "harmonic_degraded",
    "1 while the sidecar runs degraded for this reason (state_dir, producer, alert_delivery, recovery, broker); /readyz lists them.",
    Reason,
    group="Process",
    unit="1 degraded / absent or 0 not",
    use=(
        "The sidecar keeps running but something needs fixing: `state_dir` (the state directory is read-only or "
        "full: state is not saved, offsets are not committed), `producer` (the dead-letter or scores topic cannot "
        "be reached: records wait in a bounded buffer), `alert_delivery` (Alertmanager or the webhook does not "
        "answer), `recovery` (after an unclean exit, the partitions that had records in flight are re-processed one "
        "record at a time; it ends by itself, per partition, once those records are read again or revoked), `broker` (the consumer's Kafka broker cannot be reached, at start-up or later: the sidecar waits for it and consumes again when it is back). `/readyz` stays 200 and lists the reasons under `degraded`; the log says what to fix."
    ),
)
HTTP_REQUESTS_TOTAL = Counter(
    "harmonic_http_requests_total",
    "HTTP requests answered, by path (metrics, healthz, readyz, probes, other).",
    Path,
    group="Process",
    unit="requests",
    use=(
        "Requests the HTTP endpoint answered, by `path` (`metrics`, `healthz`, `readyz`, `probes`, `other`). "
        '`rate(...{path="metrics"})` against `rate(harmonic_http_render_duration_seconds_count[5m])` shows how '
        "many scrapes share each render; more scrapes than your Prometheus replicas make means someone else scrapes."
    ),
)
HTTP_REQUESTS_REJECTED_TOTAL = Counter(
    "harmonic_http_requests_rejected_total",
    "Connections or requests the HTTP endpoint refused or dropped, by reason (read_timeout, write_timeout, too_many_connections, too_many_scrapes, pool_full, bad_request, unauthorized).",
    Reason,
    group="Process",
    unit="requests",
    use=(
        "Connections or requests the endpoint refused or dropped, by `reason`: `read_timeout` (a request head did not "
        "arrive within `metrics.read_timeout_seconds`: slow or half-open clients), `write_timeout` (a client did not "
        "read its response), `too_many_connections` (over `metrics.max_connections`), `too_many_scrapes` (over "
        "`metrics.max_concurrent_scrapes`: 503), `pool_full` (`/readyz`, `/probes` or password checks queued beyond "
        "their pool: 503), `bad_request` (malformed, with a body, not GET/HEAD), `unauthorized` (missing or wrong "
        "basic-auth credentials: 401). A steady rate means a client misbehaves; "
        "docs/OPERATIONS.md, *HTTP endpoint*."
    ),
)
HTTP_RENDER_DURATION_SECONDS = Histogram(
    "harmonic_http_render_duration_seconds",
    "Wall time of one /metrics render (at most one per metrics.min_render_interval_seconds).",
    NoLabels,
    SECONDS_BUCKETS,
    group="Process",
    unit="seconds",
    use=(
        "Wall time of one `/metrics` render. Renders happen at most once per `metrics.min_render_interval_seconds` "
        "whatever the number of scrapers; a p99 approaching the scrape timeout means too many series (check the "
        "bounded labels) or a starved CPU."
    ),
)
