"""What an alert is: its rule, its state, the detectors it fired on (:class:`Evidence`), and the labels and
annotations it is sent with (:class:`Alert`). :mod:`monitor.alerts` moves alerts through their states and
re-exports each name here."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from monitor.errors import ConfigError

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


def percent(share: float) -> str:
    """A share as a percentage for a person: whole percents from 10 %, two significant digits below.

    >>> percent(0.213), percent(0.1), percent(0.005), percent(1.0)
    ('21%', '10%', '0.5%', '100%')
    """
    v = 100.0 * share
    return f"{v:.0f}%" if v >= 9.5 or not math.isfinite(v) else f"{v:.2g}%"


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
    plain : what changed, in plain words with its numbers, for an alert's summary (``"confidence fell: 21% of answers
        in the reference's least sure 10%"``); empty for an input, which the summary names (:func:`said`).

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
    plain: str = ""

    @property
    def headline(self) -> str:
        """The detector and its statistic against its threshold: ``debt_ratio KS distance 0.031 > 0.020``. A CUSUM
        back under its threshold but still on (its alarm clears below a fraction of it: hysteresis) says so rather
        than print a comparison that reads as not firing.

        >>> Evidence("confidence_tail_cusum", 11.86, 11.93, 0.63, 0.5, "…", "CUSUM").headline
        'confidence_tail_cusum CUSUM 11.86, on since it crossed 11.93'
        """
        name = f"{self.detector} {self.statistic_name}".rstrip()
        if not math.isfinite(self.threshold):
            return f"{name} {self.statistic:.3g}"
        said = compare(self.statistic, self.threshold)
        if self.statistic_name == "CUSUM" and self.statistic < self.threshold:
            value, _, limit = said.split(" ")
            return f"{name} {value}, on since it crossed {limit}"
        return f"{name} {said}"

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
            "plain": self.plain,
        }


def said(evidence: tuple[Evidence, ...], room: float = math.inf) -> str:
    """What an alert fired on, short, within ``room`` characters where it can: each detector's plain words, and the
    moved inputs in one group (by name beside plain words, else each by its headline). Detectors that say the same
    thing (``confidence fell: …`` of two confidence CUSUMs) are said once, by the first. At most three groups, chosen
    in this order while they fit: the first, the inputs (where), the accuracy estimate (how much), the others; said
    in evidence order, the rest counted (``2 more in the description``).

    >>> cusum = Evidence("confidence_cusum", 14.2, 12.3, 0.21, 0.1, "…", "CUSUM", "confidence fell")
    >>> said((cusum, Evidence("age", 0.3, 0.1, 41.0, 38.0, "…", "KS distance"), Evidence("city", 0.4, 0.1, 0, 0, "…")))
    'confidence fell; inputs moved: age, city'
    >>> said((Evidence("age", 0.031, 0.02, 41.0, 38.0, "…", "KS distance"),))
    'age KS distance 0.031 > 0.020'
    """
    named = any(e.plain for e in evidence)
    inputs = [e for e in evidence if not e.plain]
    groups: list[tuple[int, str]] = []  # (choice rank, text), in evidence order
    heads: set[str] = set()
    for e in evidence:
        if not e.plain:
            if e is inputs[0]:  # the inputs' group stands where the first of them does
                groups.append((1, _inputs(inputs, named)))
            continue
        head = e.plain.split(":", 1)[0]  # one group per thing said: the first of three confidence CUSUMs
        if head not in heads:
            heads.add(head)
            groups.append((2 if e.detector == "accuracy_estimate" else 3, e.plain))
    order = sorted(range(len(groups)), key=lambda i: (i > 0, groups[i][0], i))
    kept: list[int] = []
    for i in order[:3]:
        left = len(groups) - len(kept) - 1
        text = "; ".join([*(groups[j][1] for j in sorted([*kept, i])), *([_more(left)] if left else [])])
        if kept and len(text) > room:
            continue
        kept.append(i)
    left = len(groups) - len(kept)
    shown = [groups[j][1] for j in sorted(kept)]
    return "; ".join([*shown, _more(left)] if left else shown)


def _inputs(inputs: list[Evidence], named: bool) -> str:
    """The moved inputs as one group: by name beside plain words (the description has their numbers), else the
    first two by their headlines."""
    if named:
        names = list(dict.fromkeys(e.detector for e in inputs))
        return "inputs moved: " + ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    shown = ", ".join(e.headline for e in inputs[:2])
    return shown + (f" (+{len(inputs) - 2} more)" if len(inputs) > 2 else "")


def _more(count: int) -> str:
    return f"{count} more in the description"


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
        """What the alert fired on, short: its detectors in plain words and the inputs that moved (:func:`said`), or
        its value against its reference."""
        return self._finding()

    def _finding(self, room: float = math.inf) -> str:
        if self.evidence:
            return said(self.evidence, room)
        signal = _SIGNAL_DISPLAY.get(self.rule.signal, self.rule.signal)
        name = self.value_name or f"{signal} window mean"
        value, relation, reference = compare(self.value, self.reference).split(" ")
        return f"{name} {value} {relation} {self.reference_name} {reference}"

    @property
    def summary(self) -> str:
        """One line of at most :data:`SUMMARY_MAX` characters: the alert, where, and what it fired on (resolved: what
        it had fired on); without detectors, the value against its reference and the detail (what decided it)."""
        where = f"{self.rule.name} {self.model}/{self.segment}"
        lead = f"resolved: {where} no longer shows " if self.state is AlertState.RESOLVED else f"{where}: "
        finding = self._finding(SUMMARY_MAX - len(lead))
        if not self.evidence and self.detail:
            finding += f" ({self.detail})"
        text = lead + finding
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
