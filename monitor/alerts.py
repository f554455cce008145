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
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

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
]

#: the longest ``summary`` annotation, in characters (longer ones end in "…")
SUMMARY_MAX = 200
# How a signal is named in human-readable annotations; other signals appear verbatim.
_SIGNAL_DISPLAY: Mapping[str, str] = {"gamma": "γ", "gamma_logit": "γ (logit)", "p_adj": "P_adj"}


def compare(value: float, limit: float) -> str:
    """``value`` and ``limit`` with their true relation, each with enough digits that the comparison reads true
    (at least two significant digits of the smaller one, the same decimals for both).

    >>> compare(0.031, 0.02), compare(0.0201, 0.02), compare(14.2, 12.3), compare(0.71, 0.85), compare(3.0, 3.0)
    ('0.031 > 0.020', '0.0201 > 0.0200', '14.2 > 12.3', '0.71 < 0.85', '3.0 = 3.0')
    """
    if not (math.isfinite(value) and math.isfinite(limit)):
        return f"{value:.3g} vs {limit:.3g}"
    smallest = min((abs(v) for v in (value, limit) if v), default=1.0)
    decimals = max(1, 1 - math.floor(math.log10(smallest))) if smallest < 1e6 else 0
    most = decimals + 16  # beyond a double's precision
    while decimals < most and value != limit and round(value, decimals) == round(limit, decimals):
        decimals += 1
    a, b = f"{value:.{decimals}f}", f"{limit:.{decimals}f}"
    sign = ">" if value > limit else "<" if value < limit else "="
    return f"{a} {sign} {b}"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One detector that fired, in its own numbers: what an alert says it fired on.

    Attributes
    ----------
    detector : the detector (``flicker_cusum``, ``gamma_ks``, ``features_ks``, …) or, for an input, the input's name.
    statistic, threshold : the detector's statistic and the threshold it crossed (NaN where a p-value decides).
    window, reference : the quantity the detector watches, in the recent window and in the reference (left out of
        the text where they are equal or not finite: a category test's own statistic says it).
    measure : what ``window`` and ``reference`` are (``"share of flicker above the reference's 90th percentile"``).
    statistic_name : what ``statistic`` is (``"CUSUM"``, ``"KS distance"``, ``"TV distance"``); empty: unnamed.

    >>> Evidence("flicker_cusum", 14.2, 12.3, 0.21, 0.1, "share of flicker above the reference's 90th percentile").text
    "flicker_cusum 14.2 > 12.3 (share of flicker above the reference's 90th percentile: window 0.21 vs reference 0.1)"
    >>> Evidence("city", 0.46, 0.1, 0.0, 0.0, "category frequencies, adjusted p = 1e-09", "TV distance").text
    'city TV distance 0.46 > 0.10 (category frequencies, adjusted p = 1e-09)'
    """

    detector: str
    statistic: float
    threshold: float
    window: float
    reference: float
    measure: str
    statistic_name: str = ""

    @property
    def headline(self) -> str:
        """The detector and its statistic against its threshold: ``debt_ratio KS distance 0.031 > 0.020``."""
        name = f"{self.detector} {self.statistic_name}".rstrip()
        if math.isfinite(self.threshold):
            return f"{name} {compare(self.statistic, self.threshold)}"
        return f"{name} {self.statistic:.3g}"

    @property
    def text(self) -> str:
        """One clause for an alert's description: the headline, then what the detector watches."""
        shown = math.isfinite(self.window) and math.isfinite(self.reference) and self.window != self.reference
        numbers = f": window {self.window:.3g} vs reference {self.reference:.3g}" if shown else ""
        return f"{self.headline} ({self.measure}{numbers})"

    def to_dict(self) -> dict[str, object]:
        """JSON-able (non-finite numbers as None)."""

        def num(v: float) -> float | None:
            return float(v) if math.isfinite(v) else None

        return {
            "detector": self.detector,
            "statistic": num(self.statistic),
            "statistic_name": self.statistic_name,
            "threshold": num(self.threshold),
            "window": num(self.window),
            "reference": num(self.reference),
            "measure": self.measure,
        }


class AlertState(enum.StrEnum):
    """Where one alert is in its life cycle."""

    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alerting rule: what it is called, which signal it watches, and its timing.

    Parameters
    ----------
    name : str
        The ``alertname`` label, e.g. ``"HarmonicGammaDrift"``.
    signal : str
        The monitored signal, e.g. ``"gamma"``, ``"flicker"``, ``"shadow_disagreement"``.
    for_seconds : float
        How long the condition must hold before a pending alert fires (Prometheus ``for``); 0 fires
        on the first observation.
    resolve_after_seconds : float
        Hysteresis: how long the condition must stay false before a firing alert resolves.
    severity : str
        The ``severity`` label, e.g. ``"warning"`` or ``"critical"``.
    runbook_url : str
        Optional link added as the ``runbook_url`` annotation.

    Raises
    ------
    ConfigError
        If a name is empty or a duration is negative or not finite.
    """

    name: str
    signal: str
    for_seconds: float = 60.0
    resolve_after_seconds: float = 300.0
    severity: str = "warning"
    runbook_url: str = ""

    def __post_init__(self) -> None:
        for attr in ("name", "signal", "severity"):
            if not getattr(self, attr).strip():
                raise ConfigError(f"alert rule {attr} must be a non-empty string; got {getattr(self, attr)!r}")
        for attr in ("for_seconds", "resolve_after_seconds"):
            value = getattr(self, attr)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(
                    f"alert rule {self.name!r}: {attr} must be a finite number >= 0 seconds; got {value!r}"
                )


@dataclass(frozen=True, slots=True)
class Alert:
    """An immutable snapshot of one alert, as the engine last saw it.

    ``starts_at_seconds`` is when the condition first held (Prometheus' ``activeAt``, sent as
    ``startsAt``); ``ends_at_seconds`` is set once the alert is resolved (sent as ``endsAt``).
    ``verdict`` is fixed while the alert lives: it is a label, and a changed label set would be a
    different alert to Alertmanager.
    """

    rule: AlertRule
    model: str
    segment: str
    state: AlertState
    value: float
    reference: float
    starts_at_seconds: float
    top_features: tuple[str, ...] = ()
    detail: str = ""
    verdict: str = "harmful"
    fired_at_seconds: float | None = None
    ends_at_seconds: float | None = None
    fingerprint: str = field(default="", compare=False)
    #: the detectors that fired, each in its own numbers (empty: ``value`` vs ``reference`` says it all)
    evidence: tuple[Evidence, ...] = ()
    #: what ``value`` and ``reference`` are, for the description (default: the rule signal's window mean)
    value_name: str = ""
    reference_name: str = "reference"
    #: the ``signal`` label when it is not the rule's (the detectors a harmful shift fired on); fixed like ``verdict``
    signal: str = ""

    @property
    def labels(self) -> dict[str, str]:
        """The identifying label set: alertname, model, segment, signal, severity, verdict."""
        return {
            "alertname": self.rule.name,
            "model": self.model,
            "segment": self.segment,
            "signal": self.signal or self.rule.signal,
            "severity": self.rule.severity,
            "verdict": self.verdict,
        }

    @property
    def finding(self) -> str:
        """What the alert fired on, short: the first two detectors' headlines (and how many more), or its value
        against its reference."""
        if self.evidence:
            shown = ", ".join(e.headline for e in self.evidence[:2])
            more = len(self.evidence) - 2
            return shown + (f" (+{more} more)" if more > 0 else "")
        signal = _SIGNAL_DISPLAY.get(self.rule.signal, self.rule.signal)
        name = self.value_name or f"{signal} window mean"
        value, relation, reference = compare(self.value, self.reference).split(" ")
        return f"{name} {value} {relation} {self.reference_name} {reference}"

    @property
    def summary(self) -> str:
        """One line of at most :data:`SUMMARY_MAX` characters: the alert, where, and what it fired on (resolved: what
        it had fired on); without detectors, the value against its reference and the detail (what decided it)."""
        where = f"{self.rule.name} {self.model}/{self.segment}"
        finding = self.finding if self.evidence or not self.detail else f"{self.finding} ({self.detail})"
        if self.state is AlertState.RESOLVED:
            text = f"resolved: {where} no longer shows {finding}"
        else:
            text = f"{where}: {finding}"
        if len(text) <= SUMMARY_MAX:
            return text
        return text[: SUMMARY_MAX - 1].rsplit(" ", 1)[0] + "…"

    @property
    def description(self) -> str:
        """Each thing once: every detector that fired with its numbers (or the value against its reference), the
        detail, the other inputs that moved; a resolved alert says that its condition no longer holds."""
        text = "; ".join(e.text for e in self.evidence) if self.evidence else self.finding
        if self.detail:
            text += f" ({self.detail})"
        named = {e.detector for e in self.evidence}
        others = [f for f in self.top_features if f not in named]
        if others:
            text += f"; other inputs moved: {', '.join(others)}"
        if self.state is AlertState.RESOLVED:
            return f"The condition no longer holds. It had fired on: {text}"
        return text

    @property
    def annotations(self) -> dict[str, str]:
        """Human-readable context: summary, description, value, reference, top_features (+ runbook)."""
        out = {
            "summary": self.summary,
            "description": self.description,
            "value": f"{self.value:.6g}",
            "reference": f"{self.reference:.6g}",
            "top_features": ",".join(self.top_features),
        }
        if self.rule.runbook_url:
            out["runbook_url"] = self.rule.runbook_url
        return out


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
