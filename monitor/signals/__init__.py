"""Stage 4: one value per event: balls, γ, the scales, the scorer, the adversarial search.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.signals.adversarial import AdversarialResult, gamma_ascent_search
    from monitor.signals.balls import ball_directions
    from monitor.signals.scales import SignalScales, choose_scales
    from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig

#: each public name → the module that defines it
_HOMES = {
    "AdversarialResult": "adversarial",
    "ball_directions": "balls",
    "choose_scales": "scales",
    "gamma_ascent_search": "adversarial",
    "RobustnessScorer": "scorer",
    "ScoreResult": "scorer",
    "ScoringConfig": "scorer",
    "SignalScales": "scales",
}

__all__ = [
    "AdversarialResult",
    "RobustnessScorer",
    "ScoreResult",
    "ScoringConfig",
    "SignalScales",
    "ball_directions",
    "choose_scales",
    "gamma_ascent_search",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
