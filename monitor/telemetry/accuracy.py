"""Labels, the label-free accuracy and error estimates and the scores that need labels."""

from __future__ import annotations

from monitor.telemetry.series import (
    Counter,
    Gauge,
    Model,
    ModelLoss,
    ModelSegment,
    ModelSegmentLoss,
    ModelSegmentWindow,
    ModelSegmentWindowMethod,
    ModelSegmentWindowMethodLoss,
    NoLabels,
    Reason,
)

__all__ = [
    "LABELS_CONSUMED_TOTAL",
    "LABELS_INVALID_TOTAL",
    "LABELS_JOINED_TOTAL",
    "LABELS_UNMATCHED_TOTAL",
    "WINDOW_ACCURACY",
    "ESTIMATED_ACCURACY",
    "ESTIMATED_ACCURACY_LOWER",
    "ESTIMATED_ACCURACY_UPPER",
    "REFERENCE_ACCURACY",
    "CONFIDENCE_HARM_EVIDENCE",
    "RESILIENCE",
    "RELIABILITY",
    "ESTIMATED_ERROR",
    "ESTIMATED_ERROR_LOWER",
    "ESTIMATED_ERROR_UPPER",
    "REFERENCE_ERROR",
    "SEGMENT_REFERENCE_ACCURACY",
    "SEGMENT_REFERENCE_ERROR",
    "ROBUSTNESS_COMPOSITE",
]

LABELS_CONSUMED_TOTAL = Counter(
    "harmonic_labels_consumed_total",
    "Delayed-label messages read from the labels topic.",
    NoLabels,
    group="With delayed labels",
    unit="labels",
    use=(
        "Messages read from `kafka.labels_topic` ({id, label, ts}). Compare with the joined count: a large gap means "
        "labels for events that were not sampled, or ids that do not match the events' ids."
    ),
)
LABELS_INVALID_TOTAL = Counter(
    "harmonic_labels_invalid_total",
    "Label messages that could not be decoded, by reason.",
    Reason,
    group="With delayed labels",
    unit="labels",
    use=(
        "Label messages that could not be decoded, by the same bounded reasons as events. They are logged "
        "(rate-limited) and skipped; they never stop the loop."
    ),
)
LABELS_JOINED_TOTAL = Counter(
    "harmonic_labels_joined_total",
    "Delayed labels joined to scored events.",
    Model,
    group="With delayed labels",
    unit="labels",
    use=(
        "Labels from `kafka.labels_topic` joined to scored events by id within the time-to-live. The accuracy-based "
        "gauges below only exist when this moves."
    ),
)
LABELS_UNMATCHED_TOTAL = Counter(
    "harmonic_labels_unmatched_total",
    "Delayed labels with no scored event (not sampled, expired, or unknown id).",
    NoLabels,
    group="With delayed labels",
    unit="labels",
    use=(
        "Labels that found no event: arrived after the time-to-live, or the event was not sampled/scored. A high "
        "share means the label delay exceeds the join window."
    ),
)
WINDOW_ACCURACY = Gauge(
    "harmonic_window_accuracy",
    "Accuracy over joined labels in the window.",
    ModelSegmentWindow,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=("Accuracy over the labelled events in the window — the ground truth the label-free signals predict."),
)
ESTIMATED_ACCURACY = Gauge(
    "harmonic_estimated_accuracy",
    "Label-free estimate of the model's accuracy over the window, by method (needs a reference built with labels).",
    ModelSegmentWindowMethod,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "The model's accuracy over the window estimated from its own outputs (confidence; γ, flicker and "
        'P_adj for `method="harmonic"`; the weighted `iw`, `iw_atc` from a domain classifier on those '
        "outputs), by every method (`harmonic`, `ac`, `atc`, `doc`, `iw`, `iw_atc`); only for a model whose "
        "reference JSON was built with `reference --labels`. Recomputed every `accuracy.interval_seconds`. "
        "Read the primary method (`accuracy.method`, default `iw`) with its interval, beside "
        "`harmonic_window_accuracy` when labels arrive (they override it). Blind to a change of P(y|x) alone "
        "(docs/OPERATIONS.md, Accuracy without labels)."
    ),
)
ESTIMATED_ACCURACY_LOWER = Gauge(
    "harmonic_estimated_accuracy_lower",
    "Lower end of the estimated accuracy's 90 % interval.",
    ModelSegmentWindowMethod,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=("Lower end of the estimate's 90 % interval (realized-accuracy noise + reference-fit noise + a shift margin)."),
)
ESTIMATED_ACCURACY_UPPER = Gauge(
    "harmonic_estimated_accuracy_upper",
    "Upper end of the estimated accuracy's 90 % interval.",
    ModelSegmentWindowMethod,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "Upper end of the 90 % interval. HarmonicAccuracyDrop fires when the primary method's upper end over the count "
        "window is below `harmonic_reference_accuracy` − `accuracy.tolerance`."
    ),
)
REFERENCE_ACCURACY = Gauge(
    "harmonic_reference_accuracy",
    "Accuracy of the model on its labelled reference (what the estimates are fitted on).",
    Model,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "The model's accuracy on its labelled reference (the validation set `reference --labels` was given): what "
        "every estimate starts from, and what HarmonicAccuracyDrop compares with."
    ),
)
CONFIDENCE_HARM_EVIDENCE = Gauge(
    "harmonic_confidence_harm_evidence",
    "1 when a fall in the model's confidence counts as harm evidence in its verdict, 0 when it is fragility.",
    Model,
    group="Accuracy without labels",
    unit="0 or 1",
    use=(
        "Which rule the model's verdicts run under (`drift.confidence_harm`): 1, a fall of its confidence or margin "
        "(and of the accuracy estimate read from them) makes `harmful-shift`; 0, the labelled reference showed its "
        "least confident answers right within `accuracy.tolerance` (or the setting is `never`), and such a fall is "
        "reported as `input-shift` (fragility). The start-up log and `check-config` say why "
        "(docs/OPERATIONS.md, When confidence is not harm evidence)."
    ),
)
RESILIENCE = Gauge(
    "harmonic_resilience",
    "min(acc under σ=0.1 noise / clean acc, 1) over joined labels.",
    Model,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=(
        "min(accuracy under σ = 0.1 Gaussian noise / clean accuracy, 1) over joined labels ('Model Robustness"
        " Metrics', B)."
    ),
)
RELIABILITY = Gauge(
    "harmonic_reliability",
    "1 − ECE (10 equal-width bins) over joined labels.",
    Model,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=("1 − expected calibration error with 10 equal-width confidence bins ('Model Robustness Metrics', C)."),
)
ESTIMATED_ERROR = Gauge(
    "harmonic_estimated_error",
    "Label-free estimate of a regressor's error (loss: mae, rmse) over the window, by method (needs a reference "
    "built with true values).",
    ModelSegmentWindowMethodLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        'A regressor\'s mean absolute (`loss="mae"`) or root mean squared (`loss="rmse"`) error over the window, '
        "estimated without labels by each method (`gbdt`, the default: boosted trees' model of the labelled "
        "reference's errors; `iw`: those errors reweighted by a domain classifier; `dle`; `dr`). Blind to a change of "
        "the target given the inputs."
    ),
)
ESTIMATED_ERROR_LOWER = Gauge(
    "harmonic_estimated_error_lower",
    "Lower end of the estimated error's 90 % interval.",
    ModelSegmentWindowMethodLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        "Lower end of the 90 % interval. HarmonicErrorRise fires when the primary method's MAE lower end over the "
        'count window exceeds `harmonic_reference_error{loss="mae"}` × (1 + `accuracy.error_tolerance`).'
    ),
)
ESTIMATED_ERROR_UPPER = Gauge(
    "harmonic_estimated_error_upper",
    "Upper end of the estimated error's 90 % interval.",
    ModelSegmentWindowMethodLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use="Upper end of the 90 % interval.",
)
REFERENCE_ERROR = Gauge(
    "harmonic_reference_error",
    "A regressor's error (loss: mae, rmse) on its labelled reference (what the estimates start from).",
    ModelLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        "A regressor's MAE and RMSE on its labelled reference (`reference --labels` with true values): what every "
        "error estimate starts from, and what HarmonicErrorRise compares with."
    ),
)
SEGMENT_REFERENCE_ACCURACY = Gauge(
    "harmonic_segment_reference_accuracy",
    "Accuracy of the model on the labelled reference's rows of the segment (where the reference carries it).",
    ModelSegment,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "The segment's own reference accuracy, for a reference built with labels and a segment column (at least 50 "
        "labelled rows of the segment): what the segment's estimates and its HarmonicAccuracyDrop compare with. "
        "A segment without one compares with `harmonic_reference_accuracy`."
    ),
)
SEGMENT_REFERENCE_ERROR = Gauge(
    "harmonic_segment_reference_error",
    "A regressor's error (loss: mae, rmse) on the labelled reference's rows of the segment (where it carries it).",
    ModelSegmentLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        "The segment's own reference MAE and RMSE (a reference built with true values and a segment column, at "
        "least 50 labelled rows of the segment): what the segment's error estimates and its HarmonicErrorRise "
        "compare with. A segment without one compares with `harmonic_reference_error`."
    ),
)
ROBUSTNESS_COMPOSITE = Gauge(
    "harmonic_robustness_composite",
    "0.4·stability + 0.3·resilience + 0.3·reliability — always read beside its parts.",
    Model,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=(
        "0.4·stability + 0.3·resilience + 0.3·reliability. **Always show it beside its three parts** "
        "(`harmonic_window_stability`, `harmonic_resilience`, `harmonic_reliability`): one number hides which one "
        "moved."
    ),
)
