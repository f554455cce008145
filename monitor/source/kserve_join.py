"""Stage 1 (source): pair KServe request and response messages into events that carry the live prediction.

:class:`KServeJoiner` is the entry point for a topic that may carry either input format: plain events
pass through :class:`~monitor.source.decode.EventDecoder`; the KServe CloudEvent halves it decodes
(:mod:`monitor.source.kserve`) are held here, by ``ce_id``, until their partner arrives or a TTL passes.
Nothing here does I/O; time is the ``now`` the caller passes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from monitor.errors import ConfigError
from monitor.events import InferenceEvent
from monitor.source.decode import EventDecoder
from monitor.source.kserve import KServeRequest, KServeResponse, is_cloudevent
from monitor.source.validate import Headers, Origin

#: why :class:`KServeJoiner` drops a half (the fixed ``reason`` set of ``harmonic_kserve_dropped_total``):
#: ``duplicate``: a second request or response for a ``ce_id`` already held (a redelivery, or a reused id);
#: ``orphan_response``: a response whose request never came (TTL, the ``max_pending`` bound, or shutdown);
#: ``mismatched_response``: a response whose prediction count differs from its request's instances (the
#: request's events go on without a live prediction)
KSERVE_DROP_REASONS: tuple[str, ...] = ("duplicate", "orphan_response", "mismatched_response")


class KServeJoiner:
    """Pair KServe request and response messages by ``ce_id`` (stage 1), within a TTL and a size bound.

    This is the single entry point for a topic that may carry either format: plain events pass straight
    through; a KServe request is held until its response arrives (its events then carry the live prediction
    that shadow agreement needs) or until ``ttl_seconds`` pass (its events are then emitted without a
    prediction). A response whose request never comes is dropped at expiry and counted. When more than
    ``max_pending`` halves are held, the oldest is treated as expired. Every dropped half is counted in
    :attr:`dropped` by model and a reason from :data:`KSERVE_DROP_REASONS`.

    Held requests delay their events by at most ``ttl_seconds``; :meth:`held_positions` lets the caller keep
    its Kafka commit below them.

    Parameters
    ----------
    decoder : EventDecoder
    ttl_seconds : float
        How long a half waits for its partner, in the ``now`` the caller passes (e.g. receive time).
    max_pending : int
        Bound on halves held.

    Raises
    ------
    ConfigError
        ``ttl_seconds <= 0`` or ``max_pending < 1``.
    """

    def __init__(self, decoder: EventDecoder, *, ttl_seconds: float = 10.0, max_pending: int = 10_000) -> None:
        if not ttl_seconds > 0:
            raise ConfigError(f"ttl_seconds must be > 0; got {ttl_seconds!r}")
        if max_pending < 1:
            raise ConfigError(f"max_pending must be >= 1; got {max_pending}")
        self.decoder, self.ttl_seconds, self.max_pending = decoder, float(ttl_seconds), max_pending
        self.reset()

    def reset(self) -> None:
        """Drop every held half and zero the counters."""
        self._pending: OrderedDict[str, tuple[float, KServeRequest | KServeResponse]] = OrderedDict()
        self.paired_total = 0  # requests emitted with their response's predictions
        self.unpaired_total = 0  # requests emitted without (response late, missing, or the wrong length)
        self.orphan_responses_total = 0  # responses dropped because no request came
        self.duplicates_total = 0  # a second request or response for a held ce_id (redelivery), dropped
        self.mismatched_responses_total = 0  # responses dropped because their length differs from the request's
        #: (model, reason in KSERVE_DROP_REASONS) → halves dropped; monotone until reset() (mirror with set_counter)
        self.dropped: dict[tuple[str, str], int] = {}

    @property
    def pending(self) -> int:
        """How many halves are held."""
        return len(self._pending)

    def update(
        self,
        value: bytes,
        headers: Headers = (),
        origin: Origin | None = None,
        *,
        now: float,
        doc: Mapping[str, object] | None = None,
    ) -> list[InferenceEvent]:
        """Feed one message; return the events now ready (joined pairs, plain events, and any expired requests).
        ``doc``: the message already parsed as a JSON object (:meth:`EventDecoder.parse`), not parsed again.

        Raises
        ------
        InvalidEventError
            The message is invalid (a held partner stays held and expires normally).
        """
        ready = self.expire(now) if self._pending else []
        if not (headers and is_cloudevent(headers)):
            if doc is None:
                doc = self.decoder.load(value)
            if not ("specversion" in doc and "type" in doc):
                ready.append(self.decoder.plain(doc, value, origin, now))
                return ready
            part = self.decoder.kserve_structured(doc, origin, now)
        else:
            part = self.decoder.decode_kserve(value, headers, origin, now)
        held = self._pending.get(part.ce_id)
        if held is None:
            self._pending[part.ce_id] = (now + self.ttl_seconds, part)
            while len(self._pending) > self.max_pending:
                ready.extend(self._release(self._pending.popitem(last=False)[1][1]))
            return ready
        other = held[1]
        if type(other) is type(part):
            self.duplicates_total += 1
            self._drop(part.model, "duplicate")
            return ready
        del self._pending[part.ce_id]
        request, response = (part, other) if isinstance(part, KServeRequest) else (other, part)
        assert isinstance(request, KServeRequest) and isinstance(response, KServeResponse)
        if len(response.predictions) != request.features.shape[0]:
            self.unpaired_total += 1
            self.mismatched_responses_total += 1
            self._drop(response.model, "mismatched_response")
            ready.extend(request.events())
        else:
            self.paired_total += 1
            ready.extend(request.events(response.predictions))
        return ready

    def expire(self, now: float) -> list[InferenceEvent]:
        """Release every half held past its TTL: requests as events without a prediction, responses dropped."""
        ready: list[InferenceEvent] = []
        while self._pending:
            ce_id, (deadline, part) = next(iter(self._pending.items()))
            if deadline > now:
                break
            del self._pending[ce_id]
            ready.extend(self._release(part))
        return ready

    def flush(self) -> list[InferenceEvent]:
        """Release everything held (shutdown)."""
        ready: list[InferenceEvent] = []
        while self._pending:
            ready.extend(self._release(self._pending.popitem(last=False)[1][1]))
        return ready

    def held_positions(self) -> dict[tuple[str, int], int]:
        """(topic, partition) → smallest offset still held here.

        For at-least-once delivery, commit no further than this offset on each partition (a held message is not
        yet applied).
        """
        held: dict[tuple[str, int], int] = {}
        for _, part in self._pending.values():
            if part.origin is not None and part.origin[2] >= 0:
                key = (part.origin[0], part.origin[1])
                held[key] = min(held.get(key, part.origin[2]), part.origin[2])
        return held

    def _release(self, part: KServeRequest | KServeResponse) -> list[InferenceEvent]:
        if isinstance(part, KServeRequest):
            self.unpaired_total += 1
            return part.events()
        self.orphan_responses_total += 1
        self._drop(part.model, "orphan_response")
        return []

    def _drop(self, model: str, reason: str) -> None:
        key = (model, reason)
        self.dropped[key] = self.dropped.get(key, 0) + 1
