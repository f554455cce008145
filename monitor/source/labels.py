"""Stage 1 (labels): decode delayed ground-truth labels and join them to scored predictions by event id.

Labels arrive on their own topic as ``{"id": ..., "label": ..., "ts": ...}`` and are joined within a
bounded time-to-live. :class:`LabelJoiner` holds two bounded, insertion-ordered stores: recent *scored*
predictions (only sampled events are scored, so most labels find no partner; that is normal and counted), and
labels that arrived before their prediction was scored (a lagging inference topic). An event id joins once: the ids
joined within the TTL are remembered, so a duplicate label or a redelivered event after the join joins nothing again.
Time is the ``now`` the caller passes, in epoch seconds, so replays are deterministic. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from monitor.config import LabelSettings, setting_default
from monitor.errors import ConfigError
from monitor.events import LabelEvent
from monitor.source.validate import MAX_ID_CHARS, as_label, clean_text, invalid, parse_timestamp, shown


class LabelDecoder:
    """Decode one label message into a :class:`~monitor.events.LabelEvent`.

    Parameters
    ----------
    max_bytes : int
        Larger messages are ``too_large``.

    Examples
    --------
    >>> LabelDecoder().decode(b'{"id": "a1", "label": 1, "ts": "2026-11-20T10:00:00Z"}')
    LabelEvent(event_id='a1', label=1, timestamp_seconds=1795168800.0)
    """

    def __init__(self, max_bytes: int = 64 * 1024) -> None:
        if max_bytes < 1:
            raise ConfigError(f"max_bytes must be >= 1; got {max_bytes}")
        self.max_bytes = max_bytes

    def decode(self, value: bytes, now: float | None = None) -> LabelEvent:
        """Decode one label.

        Parameters
        ----------
        value : bytes
            UTF-8 JSON ``{"id": str|int, "label": int|bool|integral float|digit string, "ts": ISO-8601|epoch ms}``.
            The id is cleaned as the event decoders clean event ids (:func:`~monitor.source.validate.clean_text`),
            so that it still matches its event's; the label must fit in int64.
        now : float, optional
            Epoch seconds used when ``ts`` is absent.

        Raises
        ------
        InvalidEventError
            ``reason`` from :data:`monitor.source.validate.INVALID_REASONS` (too_large, not_json, not_object,
            missing_field, bad_type, bad_timestamp).
        """
        if len(value) > self.max_bytes:
            raise invalid("too_large", f"label of {len(value)} bytes exceeds max_bytes={self.max_bytes}")
        try:
            doc = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise invalid("not_json", f"label is not UTF-8 JSON ({exc}); it starts {shown(value[:40])}") from None
        if not isinstance(doc, dict):
            raise invalid("not_object", f"label must be a JSON object; got a JSON {type(doc).__name__}")
        raw_id = doc.get("id")
        if raw_id is None:
            raise invalid("missing_field", "label has no 'id'; it cannot be joined to an event")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
            raise invalid("bad_type", f"label 'id' must be a string or an integer; got {shown(raw_id)}")
        event_id = clean_text(str(raw_id), MAX_ID_CHARS)
        if "label" not in doc or doc["label"] is None:
            raise invalid("missing_field", f"label for event '{event_id}' has no 'label' field")
        label = as_label(doc["label"])
        if label is None:
            raise invalid(
                "bad_type",
                f"label for event '{event_id}' must be an integer class; got {shown(doc['label'])} (classes fit in int64)",
            )
        return LabelEvent(
            event_id=event_id, label=label, timestamp_seconds=parse_timestamp(doc.get("ts"), now, event_id)
        )


@dataclass(frozen=True, slots=True)
class ScoredPrediction:
    """What the monitor remembers about one scored event until its label arrives.

    Attributes
    ----------
    predicted_class : class predicted by the ONNX copy (None for regressors).
    confidence : probability of ``predicted_class`` (for ECE), or None.
    noisy_class : class predicted on a σ-noisy copy (for Resilience), or None.
    """

    event_id: str
    model: str
    model_version: str
    segment: str
    timestamp_seconds: float
    predicted_class: int | None
    confidence: float | None = None
    noisy_class: int | None = None


@dataclass(frozen=True, slots=True)
class JoinedLabel:
    """A scored prediction with its ground truth."""

    prediction: ScoredPrediction
    label: LabelEvent

    @property
    def correct(self) -> bool:
        """The ONNX copy's class equals the label."""
        return self.prediction.predicted_class == self.label.label

    @property
    def noisy_correct(self) -> bool | None:
        """The noisy copy's class equals the label (None when no noisy copy was scored)."""
        if self.prediction.noisy_class is None:
            return None
        return self.prediction.noisy_class == self.label.label


class LabelJoiner:
    """Join labels to scored predictions by event id, within a TTL and a size bound.

    Parameters
    ----------
    ttl_seconds : float
        How long a prediction waits for its label (and an early label for its prediction), measured in the
        ``now`` passed when it was stored. Delayed labels can take hours: size this to the label delay.
    max_predictions : int
        Bound on stored predictions; the oldest is evicted (counted in ``evicted_total``) when full. The same bound
        holds the ids already joined (each for the TTL): a label or prediction for one of them joins nothing.
    max_early_labels : int
        Bound on labels held for a prediction not yet scored; 0 disables holding (they count as unmatched).

    Raises
    ------
    ConfigError
        ``ttl_seconds <= 0``, ``max_predictions < 1`` or ``max_early_labels < 0``.

    Examples
    --------
    >>> j = LabelJoiner(ttl_seconds=60)
    >>> j.add_prediction(ScoredPrediction("a", "m", "1", "other", 0.0, predicted_class=1), now=0.0) is None
    True
    >>> j.add_label(LabelEvent("a", 1, 30.0), now=30.0).correct
    True
    >>> j.add_label(LabelEvent("a", 1, 31.0), now=31.0), j.unmatched_labels_total  # a duplicate label
    (None, 1)
    >>> j.add_prediction(ScoredPrediction("a", "m", "1", "other", 0.0, predicted_class=1), now=32.0), j.joined_total
    (None, 1)
    """

    def __init__(
        self,
        ttl_seconds: float = setting_default(LabelSettings, "ttl_seconds"),
        max_predictions: int = setting_default(LabelSettings, "max_predictions"),
        max_early_labels: int = 10_000,
    ) -> None:
        if not ttl_seconds > 0:
            raise ConfigError(f"ttl_seconds must be > 0; got {ttl_seconds!r}")
        if max_predictions < 1:
            raise ConfigError(f"max_predictions must be >= 1; got {max_predictions}")
        if max_early_labels < 0:
            raise ConfigError(f"max_early_labels must be >= 0; got {max_early_labels}")
        self.ttl_seconds, self.max_predictions, self.max_early_labels = (
            float(ttl_seconds),
            max_predictions,
            max_early_labels,
        )
        self.reset()

    def reset(self) -> None:
        """Forget every stored prediction and label; zero the counters."""
        self._predictions: OrderedDict[str, tuple[float, ScoredPrediction]] = OrderedDict()
        self._labels: OrderedDict[str, tuple[float, LabelEvent]] = OrderedDict()
        self._joined: OrderedDict[str, tuple[float, None]] = OrderedDict()
        self.joined_total = 0
        self.expired_total = 0  # predictions whose label never came within the TTL
        self.evicted_total = 0  # predictions pushed out by max_predictions before their TTL
        self.unmatched_labels_total = 0  # labels with no stored prediction (unsampled, expired, or duplicate)
        self.redelivered_total = 0  # predictions of an id already joined (a redelivered event): not stored

    @property
    def pending_predictions(self) -> int:
        return len(self._predictions)

    @property
    def pending_labels(self) -> int:
        return len(self._labels)

    def add_prediction(self, prediction: ScoredPrediction, now: float) -> JoinedLabel | None:
        """Store a scored prediction, or join it at once with a label that arrived early.

        A second prediction for a stored id replaces the first (a redelivered event); one for an id already joined
        is dropped (counted in ``redelivered_total``).
        """
        self.expire(now)
        if prediction.event_id in self._joined:
            self.redelivered_total += 1
            return None
        early = self._labels.pop(prediction.event_id, None)
        if early is not None:
            return self._join(prediction, early[1], now)
        self._predictions.pop(prediction.event_id, None)
        self._predictions[prediction.event_id] = (now + self.ttl_seconds, prediction)
        while len(self._predictions) > self.max_predictions:
            self._predictions.popitem(last=False)
            self.evicted_total += 1
        return None

    def add_label(self, label: LabelEvent, now: float) -> JoinedLabel | None:
        """Join a label with its stored prediction; otherwise hold it (bounded) for a late prediction. A label for an
        id already joined is a duplicate: counted unmatched, never held."""
        self.expire(now)
        stored = self._predictions.pop(label.event_id, None)
        if stored is not None:
            return self._join(stored[1], label, now)
        if self.max_early_labels == 0 or label.event_id in self._joined:
            self.unmatched_labels_total += 1
            return None
        if label.event_id in self._labels:
            self.unmatched_labels_total += 1  # a duplicate label: keep the first
            return None
        self._labels[label.event_id] = (now + self.ttl_seconds, label)
        while len(self._labels) > self.max_early_labels:
            self._labels.popitem(last=False)
            self.unmatched_labels_total += 1
        return None

    def _join(self, prediction: ScoredPrediction, label: LabelEvent, now: float) -> JoinedLabel:
        """The pair, counted, its id remembered for the TTL (bounded by ``max_predictions``)."""
        self.joined_total += 1
        self._joined[prediction.event_id] = (now + self.ttl_seconds, None)
        while len(self._joined) > self.max_predictions:
            self._joined.popitem(last=False)
        return JoinedLabel(prediction, label)

    def expire(self, now: float) -> None:
        """Drop predictions and held labels older than the TTL (counted), and the joined ids as old."""
        self.expired_total += _drop_expired(self._predictions, now)
        self.unmatched_labels_total += _drop_expired(self._labels, now)
        _drop_expired(self._joined, now)


def _drop_expired(held: OrderedDict[str, tuple[float, Any]], now: float) -> int:
    """Drop the entries of ``held`` (oldest first, each keyed to its (deadline, item)) whose deadline is past at
    ``now``; how many were dropped."""
    dropped = 0
    while held:
        deadline = next(iter(held.values()))[0]
        if deadline > now:
            break
        held.popitem(last=False)
        dropped += 1
    return dropped
