"""Probes: budgeted jobs through the model: regions, perturbations, the funnel, the scheduler and the probe report.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.probes.funnel import FunnelConfig, FunnelResult
    from monitor.probes.offline import ProbeOptions, probe_region
    from monitor.probes.perturbations import PERTURBATION_NAMES
    from monitor.probes.probe_report import SchedulerReport, publish_probe_report
    from monitor.probes.profile import ProfileEntry
    from monitor.probes.report import write_report
    from monitor.probes.scheduler import ProbeScheduler

#: each public name → the module that defines it
_HOMES = {
    "FunnelConfig": "funnel",
    "FunnelResult": "funnel",
    "PERTURBATION_NAMES": "perturbations",
    "probe_region": "offline",
    "ProbeOptions": "offline",
    "ProbeScheduler": "scheduler",
    "ProfileEntry": "profile",
    "publish_probe_report": "probe_report",
    "SchedulerReport": "probe_report",
    "write_report": "report",
}

__all__ = [
    "FunnelConfig",
    "FunnelResult",
    "PERTURBATION_NAMES",
    "ProbeOptions",
    "ProbeScheduler",
    "ProfileEntry",
    "SchedulerReport",
    "probe_region",
    "publish_probe_report",
    "write_report",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
