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
