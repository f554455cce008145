"""harmonic-monitor: label-free robustness monitoring (anharmonicity γ, flicker, drift, probes) for ML models."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
