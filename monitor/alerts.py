"""The alert engine — rules, per-(rule, model, segment) state, and transitions.

Each evaluation the app tells the engine, per rule and per (model, segment), whether the rule's
condition holds now (a drift detector fired, a disagreement rate is over its limit, ...) together
with the numbers a person on call needs: the window value, the reference value, a test detail
(``"KS p=1e-09"``) and the features that moved most. The engine turns that stream of booleans into
alerts with Prometheus' semantics::

    inactive --condition--> pending --held for `for_seconds`--> firing
    firing --condition false for `resolve_after_seconds`--> resolved (then inactive again)

* ``for_seconds`` stops one bad window from paging anyone; a pending alert whose condition drops
  goes back to inactive silently.
* ``resolve_after_seconds`` is the hysteresis: a firing alert resolves only after its condition
  has been false *continuously* that long, so a condition that toggles on and off does not make
  the alert flap between firing and resolved.
* Deduplication: there is exactly one alert per fingerprint (rule, model, segment); observing a
  held condition again updates its numbers and emits nothing.

Conditions are evaluated on a clock as well as on new data: :meth:`AlertEngine.advance` moves every
pending and firing alert on to a later time with the condition it was last observed with, so a pending
alert fires and a clearing one resolves on time although no new evaluation arrives, and an alert whose
evidence went *quiet* (its model and segment received no events for a while; the caller decides) counts
its condition as false and resolves after the hysteresis.

Only the two transitions that leave the process — *fired* and *resolved* — are returned as
:class:`AlertEvent` objects; :mod:`monitor.exporters.delivery` sends them. The engine does no I/O
and reads no clock: ``now_seconds`` (Unix epoch seconds, the timestamps go into ``startsAt`` and
``endsAt``; :mod:`monitor.clock` in the sidecar) is passed in on every call, so a list of booleans
is enough to test it.

What an alert is (its rule, state, evidence, labels and texts) is declared in :mod:`monitor.alert_types`; every name
is imported from here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

from monitor.alert_types import SUMMARY_MAX, Alert, AlertRule, AlertState, Evidence, compare, percent, said
from monitor.errors import ConfigError

__all__ = [
    "SUMMARY_MAX",
    "Alert",
    "AlertDetails",
    "AlertEngine",
    "AlertEvent",
    "AlertRule",
    "AlertState",
    "Evidence",
    "compare",
    "fingerprint",
    "percent",
    "said",
]


class AlertDetails(TypedDict, total=False):
    """The keywords of :meth:`AlertEngine.observe` that describe an evaluation; a caller that passes them through
    takes them as ``**details: Unpack[AlertDetails]``."""

    #: names of the features that moved most, most moved first
    top_features: Sequence[str]
    #: extra evidence for the description, e.g. ``"KS p=1e-09"``
    detail: str
    #: ``"harmful-shift"`` or ``"input-shift"`` (or another short word); fixed when the alert goes pending
    verdict: str
    #: the detectors that fired, each with its own statistic, threshold, window and reference values
    evidence: Sequence[Evidence]
    #: what ``value`` is, for the description (default: the signal's window mean); a rate against a threshold names it
    value_name: str
    #: what ``reference`` is, for the description (default: "reference")
    reference_name: str
    #: the ``signal`` label when it is not the rule's (what a harmful shift fired on); fixed, like ``verdict``, when
    #: the alert goes pending
    signal: str


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """A transition that leaves the engine: ``alert.state`` is FIRING or RESOLVED."""

    alert: Alert
    previous: AlertState
    at_seconds: float

    @property
    def fingerprint(self) -> str:
        """The alert's identity (same for its fired and resolved events)."""
        return self.alert.fingerprint


def fingerprint(rule_name: str, model: str, segment: str) -> str:
    """A stable 16-hex-digit identity for (rule, model, segment).

    >>> fingerprint("GammaDrift", "credit", "eu") == fingerprint("GammaDrift", "credit", "eu")
    True
    >>> len(fingerprint("GammaDrift", "credit", "eu"))
    16
    """
    key = "\x00".join((rule_name, model, segment)).encode("utf-8")
    return hashlib.sha256(key).hexdigest()[:16]


@dataclass(slots=True)
class _Tracked:
    """Mutable engine-side state of one pending or firing alert."""

    alert: Alert
    clear_since_seconds: float | None = None


def _refreshed(current: Alert, seen: Alert, *, keep_evidence: bool) -> Alert:
    """``current`` with the numbers and texts of ``seen``, a later evaluation of the same alert; its labels (verdict
    and signal included), state and times stay as they were."""
    return replace(
        current,
        value=seen.value,
        reference=seen.reference,
        top_features=seen.top_features,
        detail=seen.detail,
        evidence=current.evidence if keep_evidence else seen.evidence,
        value_name=seen.value_name,
        reference_name=seen.reference_name,
    )


class AlertEngine:
    """Evaluates alert rules against per-(model, segment) observations; pure, clock passed in.

    Parameters
    ----------
    rules : iterable of AlertRule
        The rules, with unique names.

    Raises
    ------
    ConfigError
        If there are no rules or two share a name.

    Examples
    --------
    >>> engine = AlertEngine([AlertRule("GammaDrift", "gamma", for_seconds=60, resolve_after_seconds=120)])
    >>> obs = dict(model="credit", segment="eu", value=0.08, reference=0.01)
    >>> engine.observe("GammaDrift", condition=True, now_seconds=0, **obs) is None  # pending
    True
    >>> engine.observe("GammaDrift", condition=True, now_seconds=60, **obs).alert.state
    <AlertState.FIRING: 'firing'>
    >>> engine.observe("GammaDrift", condition=False, now_seconds=90, **obs) is None  # hysteresis
    True
    >>> engine.observe("GammaDrift", condition=False, now_seconds=210, **obs).alert.state
    <AlertState.RESOLVED: 'resolved'>
    >>> engine.fired_total, engine.resolved_total
    (1, 1)
    """

    def __init__(self, rules: Iterable[AlertRule]) -> None:
        by_name: dict[str, AlertRule] = {}
        for rule in rules:
            if rule.name in by_name:
                raise ConfigError(f"alert rule names must be unique; {rule.name!r} appears twice")
            by_name[rule.name] = rule
        if not by_name:
            raise ConfigError("AlertEngine needs at least one AlertRule; got none")
        self._rules: Mapping[str, AlertRule] = by_name
        self.reset()

    def reset(self) -> None:
        """Forget every alert and zero the counters."""
        self._tracked: dict[str, _Tracked] = {}
        self._fired_total = 0
        self._resolved_total = 0

    @property
    def rules(self) -> tuple[AlertRule, ...]:
        """The configured rules, in the order given."""
        return tuple(self._rules.values())

    @property
    def fired_total(self) -> int:
        """Alerts that went to FIRING since the last reset."""
        return self._fired_total

    @property
    def resolved_total(self) -> int:
        """Alerts that went from FIRING to RESOLVED since the last reset."""
        return self._resolved_total

    def observe(
        self,
        rule: str,
        *,
        model: str,
        segment: str,
        condition: bool,
        value: float,
        reference: float,
        now_seconds: float,
        top_features: Sequence[str] = (),
        detail: str = "",
        verdict: str = "harmful",
        evidence: Sequence[Evidence] = (),
        value_name: str = "",
        reference_name: str = "reference",
        signal: str = "",
    ) -> AlertEvent | None:
        """Feed one evaluation of ``rule`` for (``model``, ``segment``); return the transition, if any.

        Parameters
        ----------
        rule : str
            Name of a configured :class:`AlertRule`.
        model, segment : str
            Which slice was evaluated (label values).
        condition : bool
            Whether the rule's condition holds in this evaluation.
        value, reference : float
            The window value and its reference (go into the annotations).
        now_seconds : float
            Evaluation time, Unix epoch seconds. A clock that steps back is tolerated (durations never go negative).
        top_features, detail, verdict, evidence, value_name, reference_name, signal
            What the evaluation found, for the labels and annotations: see :class:`AlertDetails`.

        Returns
        -------
        AlertEvent or None
            An event when the alert fired or resolved in this evaluation; otherwise None
            (pending, still firing, still inactive, hysteresis running).

        Raises
        ------
        ConfigError
            If no rule is called ``rule``.
        """
        spec = self._rules.get(rule)
        if spec is None:
            raise ConfigError(f"no alert rule named {rule!r}; configured rules: {sorted(self._rules)}")
        fp = fingerprint(rule, model, segment)
        tracked = self._tracked.get(fp)
        if tracked is None and not condition:
            return None
        seen = Alert(
            rule=spec,
            model=model,
            segment=segment,
            state=AlertState.PENDING,
            value=float(value),
            reference=float(reference),
            starts_at_seconds=now_seconds,
            top_features=tuple(top_features),
            detail=detail,
            verdict=verdict,
            fingerprint=fp,
            evidence=tuple(evidence),
            value_name=value_name,
            reference_name=reference_name,
            signal=signal,
        )
        if tracked is None:
            tracked = self._tracked[fp] = _Tracked(seen)
            return self._maybe_fire(tracked, now_seconds)
        # Deduplicated: same alert, latest numbers; a held alert keeps the evidence it fired on while its condition is
        # off (the hysteresis).
        tracked.alert = _refreshed(tracked.alert, seen, keep_evidence=not (evidence or condition))
        return self._follow(fp, tracked, condition, now_seconds)

    def _follow(self, fp: str, tracked: _Tracked, condition: bool, now_seconds: float) -> AlertEvent | None:
        """A known alert's next step: a pending one fires after ``for_seconds`` or is dropped with its condition; a
        firing one resolves once its condition has been false for ``resolve_after_seconds``."""
        if tracked.alert.state is AlertState.PENDING:
            if not condition:
                # A pending alert that lost its condition was never announced: drop it silently.
                del self._tracked[fp]
                return None
            return self._maybe_fire(tracked, now_seconds)

        # FIRING: the hysteresis clock runs only while the condition is continuously false.
        if condition:
            tracked.clear_since_seconds = None
            return None
        if tracked.clear_since_seconds is None:
            tracked.clear_since_seconds = now_seconds
        if now_seconds - tracked.clear_since_seconds < tracked.alert.rule.resolve_after_seconds:
            return None
        del self._tracked[fp]
        self._resolved_total += 1
        resolved = replace(tracked.alert, state=AlertState.RESOLVED, ends_at_seconds=now_seconds)
        return AlertEvent(alert=resolved, previous=AlertState.FIRING, at_seconds=now_seconds)

    def advance(self, now_seconds: float, *, quiet: Collection[tuple[str, str]] = ()) -> list[AlertEvent]:
        """Evaluate every pending and firing alert at ``now_seconds`` without new data.

        Each alert's condition is the one it was last observed with (a pending alert's held; a firing alert's
        held unless its hysteresis clock runs), or false where its (model, segment) is in ``quiet``: no recent
        evidence. So a pending alert fires once ``for_seconds`` have passed, and a firing alert whose condition
        is false or quiet resolves once ``resolve_after_seconds`` have passed, on a stream that sends nothing.

        Parameters
        ----------
        now_seconds : float
            Evaluation time, Unix epoch seconds.
        quiet : collection of (model, segment)
            Slices whose conditions count as false.

        Returns
        -------
        list of AlertEvent
            The transitions, in :meth:`active` order.

        Examples
        --------
        >>> engine = AlertEngine([AlertRule("GammaDrift", "gamma", for_seconds=0, resolve_after_seconds=120)])
        >>> engine.observe("GammaDrift", model="m", segment="s", condition=True, value=1, reference=0, now_seconds=0)
        ... # doctest: +ELLIPSIS
        AlertEvent(...)
        >>> engine.advance(60, quiet={("m", "s")}), [e.alert.state.value for e in engine.advance(180, quiet={("m", "s")})]
        ([], ['resolved'])
        """
        events: list[AlertEvent] = []
        for alert in self.active():
            tracked = self._tracked[alert.fingerprint]
            held = alert.state is AlertState.PENDING or tracked.clear_since_seconds is None
            event = self.observe(
                alert.rule.name,
                model=alert.model,
                segment=alert.segment,
                condition=held and (alert.model, alert.segment) not in quiet,
                value=alert.value,
                reference=alert.reference,
                now_seconds=now_seconds,
                top_features=alert.top_features,
                detail=alert.detail,
                verdict=alert.verdict,
                evidence=alert.evidence,
                value_name=alert.value_name,
                reference_name=alert.reference_name,
                signal=alert.signal,
            )
            if event is not None:
                events.append(event)
        return events

    def _maybe_fire(self, tracked: _Tracked, now_seconds: float) -> AlertEvent | None:
        alert = tracked.alert
        if now_seconds - alert.starts_at_seconds < alert.rule.for_seconds:
            return None
        tracked.alert = replace(alert, state=AlertState.FIRING, fired_at_seconds=now_seconds)
        self._fired_total += 1
        return AlertEvent(alert=tracked.alert, previous=AlertState.PENDING, at_seconds=now_seconds)

    def get(self, rule: str, *, model: str, segment: str) -> Alert | None:
        """The pending or firing alert for (rule, model, segment), or None when inactive."""
        tracked = self._tracked.get(fingerprint(rule, model, segment))
        return None if tracked is None else tracked.alert

    def active(self) -> tuple[Alert, ...]:
        """Every pending or firing alert, sorted by (rule, model, segment); read-only snapshots."""
        alerts = (t.alert for t in self._tracked.values())
        return tuple(sorted(alerts, key=lambda a: (a.rule.name, a.model, a.segment)))

    def firing(self) -> tuple[Alert, ...]:
        """The firing subset of :meth:`active`."""
        return tuple(a for a in self.active() if a.state is AlertState.FIRING)
