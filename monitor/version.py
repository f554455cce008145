"""The package's version: what ``harmonic_up`` and the ``run`` start line report, and ``monitor.__version__``."""

from __future__ import annotations

__version__ = "0.1.0"
