"""Stage 2: which events get scored (uniform, stratified, keep-all) and the ingest-first CPU budget.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.sampler.base import Sampler
    from monitor.sampler.ingest_first import IngestFirst
    from monitor.sampler.keep_all import KeepAllSampler
    from monitor.sampler.stratified import StratifiedSampler
    from monitor.sampler.uniform import UniformSampler
    from monitor.sampler.uniform_config import UniformSamplerConfig

#: each public name → the module that defines it
_HOMES = {
    "IngestFirst": "ingest_first",
    "KeepAllSampler": "keep_all",
    "Sampler": "base",
    "StratifiedSampler": "stratified",
    "UniformSampler": "uniform",
    "UniformSamplerConfig": "uniform_config",
}

__all__ = [
    "IngestFirst",
    "KeepAllSampler",
    "Sampler",
    "StratifiedSampler",
    "UniformSampler",
    "UniformSamplerConfig",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
