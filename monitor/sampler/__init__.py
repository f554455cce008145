"""Stage 2: which events get scored (uniform, stratified, keep-all) and the ingest-first CPU budget.

``__all__`` names what other packages import from this one; each is loaded from its module on first use, so
importing the package imports none of its modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'monitor.sampler' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"monitor.sampler.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
