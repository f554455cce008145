"""Two or more models on the same rows: scored at the same scales, compared pair by pair with paired intervals, a
Pareto statement instead of a composite score, the rows where they disagree and the fragilities they share
(``harmonic-monitor compare``, :func:`monitor.compare`).

``columns.py`` maps each model's inputs from one table by name; ``paired.py`` holds the paired bootstrap, the Pareto
relation and the disagreement inputs; ``fragility.py`` splits ε* profiles into universal and model-specific
fragilities; ``run.py`` scores and compares; ``result.py`` is the typed result.
"""

from __future__ import annotations

from monitor.comparison.result import Comparison
from monitor.comparison.run import AXES, compare_models

__all__ = ["AXES", "Comparison", "compare_models"]
