"""Stage 6: what leaves the process: the ``/metrics`` state and its HTTP server (in a child process), alert delivery, the listen socket and web config.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.exporters.alert_senders import AlertmanagerSender, WebhookSender
    from monitor.exporters.delivery import DeliveryWorker
    from monitor.exporters.http import QueryHandler
    from monitor.exporters.http_process import ProcessMetricsServer, Published
    from monitor.exporters.prometheus import MetricsState
    from monitor.exporters.webconfig import load_web_config

#: each public name → the module that defines it
_HOMES = {
    "AlertmanagerSender": "alert_senders",
    "DeliveryWorker": "delivery",
    "load_web_config": "webconfig",
    "MetricsState": "prometheus",
    "ProcessMetricsServer": "http_process",
    "Published": "http_process",
    "QueryHandler": "http",
    "WebhookSender": "alert_senders",
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

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
