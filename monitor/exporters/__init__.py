"""Stage 6: what leaves the process: the ``/metrics`` state and its HTTP server (in a child process), alert delivery, the listen socket and web config.

``__all__`` names what other packages import from this one; each is loaded from its module on first use, so
importing the package imports none of its modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monitor.exporters.delivery import AlertmanagerSender, DeliveryWorker, WebhookSender
    from monitor.exporters.http import QueryHandler
    from monitor.exporters.http_process import ProcessMetricsServer, Published
    from monitor.exporters.prometheus import MetricsState
    from monitor.exporters.webconfig import load_web_config

#: each public name → the module that defines it
_HOMES = {
    "AlertmanagerSender": "delivery",
    "DeliveryWorker": "delivery",
    "load_web_config": "webconfig",
    "MetricsState": "prometheus",
    "ProcessMetricsServer": "http_process",
    "Published": "http_process",
    "QueryHandler": "http",
    "WebhookSender": "delivery",
}

__all__ = [
    "AlertmanagerSender",
    "DeliveryWorker",
    "MetricsState",
    "ProcessMetricsServer",
    "Published",
    "QueryHandler",
    "WebhookSender",
    "load_web_config",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'monitor.exporters' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"monitor.exporters.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
