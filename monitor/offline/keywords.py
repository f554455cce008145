"""The keyword sets the offline functions share, each declared once as a ``TypedDict`` and taken as
``**options: Unpack[...]``: :func:`monitor.score`, :func:`monitor.reference` and :func:`monitor.estimate` take
``radius=…, flicker_copies=…`` as ``harmonic-monitor score`` takes its flags, and mypy checks each name and type.

>>> scoring_config({"flicker_copies": 4}).flicker_copies, scoring_config({}).radius
(4, 0.05)
>>> split_keywords("score", {"radus": 1.0}, ScoringKeywords)
Traceback (most recent call last):
TypeError: score() got an unexpected keyword argument 'radus'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from monitor.config import ScoringSettings, setting_default

if TYPE_CHECKING:
    from monitor.signals.scales import SignalScales
    from monitor.signals.scorer import ScoringConfig

#: the default seed (the setting's): what :func:`monitor.report` seeds its scoring and probes with
SEED: int = setting_default(ScoringSettings, "seed")


class ScoringKeywords(TypedDict, total=False):
    """What the scorer computes (``harmonic-monitor score``'s options): the fields of
    :class:`~monitor.signals.scorer.ScoringConfig`, each defaulting to its setting
    (:class:`monitor.config.ScoringSettings`)."""

    radius: float
    sigma: float
    flicker_copies: int
    steps: int
    seed: int
    ball: str
    output: str
    regression_tolerance: float


class StandardizeKeywords(TypedDict, total=False):
    """How the reference standardizes the rows: ``space`` (``standardized``, or ``raw``: radius and σ in the
    features' own units), ``scale`` (``per_feature``, ``global`` or ``per_channel``) and ``channel_axis``; the
    defaults are the settings' (:class:`monitor.config.ScoringSettings`)."""

    space: str
    scale: str
    channel_axis: int


class ScoreKeywords(ScoringKeywords, StandardizeKeywords, total=False):
    """:func:`monitor.score`'s and :func:`monitor.estimate`'s options: what is computed, and in which units."""


class BuildKeywords(TypedDict, total=False):
    """How :func:`monitor.reference` builds the reference (``harmonic-monitor reference``'s flags): ``sample_rows``
    (5000: rows scored, per segment with segments), ``scales`` (``fixed``, or ``from-reference``: σ = r chosen so
    that ``target_flicker_share``, 0.5, of the rows flicker), ``calibration`` (``temperature``), ``label_kind``
    (``values`` or ``indices``) and ``max_segments`` (the setting's)."""

    sample_rows: int
    scales: str
    target_flicker_share: float
    calibration: str
    label_kind: str
    max_segments: int


class ReferenceKeywords(ScoreKeywords, BuildKeywords, total=False):
    """:func:`monitor.reference`'s options: what is computed, in which units, and how the reference is built."""


def keyword_names(group: type) -> frozenset[str]:
    """The names a keyword set (one of the ``TypedDict`` classes above) declares."""
    names: frozenset[str] = group.__required_keys__ | group.__optional_keys__  # type: ignore[attr-defined]
    return names


def split_keywords(function: str, given: Mapping[str, Any], *groups: type) -> tuple[dict[str, Any], ...]:
    """``given`` split by keyword set, in the order of ``groups``; a name no set declares is refused as Python
    refuses an unknown keyword."""
    known = [keyword_names(g) for g in groups]
    for name in given:
        if not any(name in k for k in known):
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    return tuple({k: v for k, v in given.items() if k in names} for names in known)


def scoring_config(options: Mapping[str, Any], scales: SignalScales | None = None) -> ScoringConfig:
    """The scorer's configuration of the scoring keywords among ``options`` (the rest are ignored); ``scales`` (a
    reference's own choice) replace radius and σ, as ``run`` scores at them."""
    from monitor.signals.scorer import ScoringConfig

    chosen = {k: v for k, v in options.items() if k in keyword_names(ScoringKeywords)}
    if scales is not None:
        chosen.update(radius=scales.radius, sigma=scales.sigma)
    return ScoringConfig(**chosen)
