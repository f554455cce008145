"""Where each model watch's report goes: the one place the watches' results are sent on.

A :class:`~monitor.runtime.watch.ModelWatch` returns what it produced as a
:class:`~monitor.runtime.watch_report.WatchReport`; :class:`Fanout` sends its series to the model's
:class:`~monitor.runtime.watch_metrics.WatchMetrics` (the metrics state), its alert transitions to delivery (the
service's delivery workers) and the whole report to its subscribers (``replay``'s timeline). The pipeline drains
every watch through it at the end of each step, before anything reads the metrics state or saves it, and after the
alerts move on with the clock (:meth:`~monitor.runtime.pipeline.Pipeline.tick_alerts`). The probe scheduler's
:class:`~monitor.probes.probe_report.SchedulerReport` goes out at the same drains.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from monitor.alerts import AlertEvent
from monitor.exporters.prometheus import MetricsState
from monitor.probes.probe_report import SchedulerReport, publish_probe_report
from monitor.runtime.watch import ModelWatch
from monitor.runtime.watch_metrics import WatchMetrics
from monitor.runtime.watch_report import WatchReport

log = logging.getLogger("monitor.runtime.fanout")

#: a subscriber to the watches' reports (``Fanout.subscribers``)
ReportSubscriber = Callable[[WatchReport], None]


class Fanout:
    """Sends the watches' reports on: series into ``state``, alert transitions to ``deliver``, reports to
    :attr:`subscribers`."""

    def __init__(self, state: MetricsState, deliver: Callable[[AlertEvent], None] | None = None) -> None:
        self.state = state
        self.deliver = deliver
        #: called with every report that tells a change (verdict change, detector crossing, alert transition); one
        #: that raises is logged, the others still get the report
        self.subscribers: list[ReportSubscriber] = []
        self._telemetry: dict[str, WatchMetrics] = {}
        #: the probe scheduler's ``take_report``: its series are written with the watches' at every drain
        self.probe_reporters: list[Callable[[], SchedulerReport]] = []

    def send(self, report: WatchReport) -> None:
        """Write ``report``'s series, deliver its alert transitions, then tell the subscribers."""
        metrics = self._telemetry.get(report.model)
        if metrics is None:  # the model's series are registered with its first report
            metrics = self._telemetry[report.model] = WatchMetrics(report.model, self.state)
        metrics.publish(report)
        if self.deliver is not None:
            for event in report.alerts:
                self.deliver(event)
        if not report.changes:
            return
        for subscriber in self.subscribers:
            try:
                subscriber(report)
            except Exception:
                log.exception("watch report subscriber failed", extra={"model": report.model})

    def drain(self, watches: Iterable[ModelWatch | None]) -> None:
        """Take each watch's report and send it (None: a model without a watch yet), then write the probe
        reporters' series."""
        for watch in watches:
            if watch is not None:
                self.send(watch.take_report())
        for take_report in self.probe_reporters:
            publish_probe_report(self.state, take_report())
