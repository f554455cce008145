"""Stage 4: one value per event: balls, γ, the scales, the scorer, the adversarial search.

``__all__`` names what other packages import from this one; each is loaded from its module on first use, so
importing the package imports none of its modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'monitor.signals' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"monitor.signals.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
