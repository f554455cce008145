"""harmonic-monitor: label-free robustness monitoring (anharmonicity γ, flicker, drift, probes) for ML models.

The Python API (:mod:`monitor.api`) is imported on first use, so ``import monitor`` stays cheap:

>>> import monitor
>>> sorted(n for n in monitor.__all__ if n != "__version__")
['compare', 'estimate', 'probe', 'reference', 'replay', 'report', 'score']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monitor.version import __version__

__all__ = ["__version__", "compare", "estimate", "probe", "reference", "replay", "report", "score"]

if TYPE_CHECKING:
    from monitor.api import compare, estimate, probe, reference, replay, report, score

_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from monitor import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'monitor' has no attribute {name!r}")
