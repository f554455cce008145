"""Assembles the running sidecar from :class:`Settings`: models, Kafka source and sink, sampler, pipeline, metrics
HTTP server, alert delivery and the probe scheduler. Owns their lifetimes (a context manager)."""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from monitor import telemetry as tel
from monitor.alerts import AlertEvent
from monitor.allocator import TimedCollector
from monitor.clock import WatermarkClock
from monitor.config import KafkaSettings, Settings
from monitor.cpus import affinity_cpus, cgroup_cpu_limit
from monitor.exporters.delivery import AlertmanagerSender, DeliveryWorker, WebhookSender
from monitor.exporters.http_process import ProcessMetricsServer, Published
from monitor.exporters.listen import listen
from monitor.exporters.prometheus import MetricsState
from monitor.runtime.gammamap_view import gamma_map_document
from monitor.runtime.models import ModelRuntime, load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.sampler.base import Sampler
from monitor.sampler.keep_all import KeepAllSampler
from monitor.sampler.stratified import StratifiedSampler
from monitor.sampler.uniform import UniformSampler
from monitor.sampler.uniform_config import UniformSamplerConfig
from monitor.source.base import ProducerCounts, RebalanceHandler, Sink, Source
from monitor.source.kafka_sink import Producer
from monitor.version import __version__

log = logging.getLogger("monitor.runtime.service")


def _rd_producer(k: KafkaSettings) -> Producer:
    """A librdkafka producer for :class:`~monitor.source.kafka_sink.KafkaSink` (``kafka.client: librdkafka``)."""
    from monitor.source.rdkafka import new_rd_producer

    return new_rd_producer(
        k.bootstrap_servers, k.api_version_tuple(), k.security, "harmonic-monitor", k.producer_delivery_timeout_ms
    )


def build_sampler(settings: Settings) -> Sampler:
    """``events_per_second: 0`` scores everything; otherwise work-conserving sampling: every event is
    scored while the measured scoring cost fits in ``cpu_share`` of the available CPUs, and above that one budget
    is shared by all models (max-min fair shares), capped at ``events_per_second`` when set; class-stratified by
    default."""
    s = settings.sampler
    if s.events_per_second == 0:
        return KeepAllSampler()
    # CPUs' worth of time: affinity capped by the cgroup quota, fractional (a 1.5-CPU limit is 1.5, not 2)
    quota = cgroup_cpu_limit()
    cpus = min(float(affinity_cpus()), quota) if quota is not None else float(affinity_cpus())
    cls = StratifiedSampler if s.stratify else UniformSampler
    return cls(
        UniformSamplerConfig(
            s.events_per_second or 0.0, cpus=cpus, cpu_share=s.cpu_share, burst_seconds=s.burst_seconds
        )
    )


class _Rebalance:
    """Forwards consumer-group callbacks to the pipeline, which exists only after the source does."""

    def __init__(self) -> None:
        self.target: RebalanceHandler | None = None

    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        if self.target is not None:
            self.target.before_revoke(partitions)

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        if self.target is not None:
            self.target.after_assign(partitions)


def _delivery_workers(settings: Settings) -> list[DeliveryWorker]:
    """One alert delivery worker per configured receiver (Alertmanager, the webhook), not started."""
    workers: list[DeliveryWorker] = []
    if settings.alerts.alertmanager_url:
        workers.append(DeliveryWorker(AlertmanagerSender(settings.alerts.alertmanager_url), name="alertmanager"))
    if settings.alerts.webhook_url:
        workers.append(
            DeliveryWorker(
                WebhookSender(settings.alerts.webhook_url),
                name="webhook",
                resend_interval_seconds=settings.alerts.repeat_interval_seconds,
            )
        )
    return workers


class Service:
    """The running sidecar. ``with Service.from_settings(s) as svc: svc.run(stop)``."""

    def __init__(
        self,
        settings: Settings,
        source: Source,
        runtimes: Sequence[ModelRuntime],
        *,
        sink: Sink | None = None,
        state: MetricsState | None = None,
        serve_metrics: bool = True,
        clock: Callable[[], float] = time.time,
        alert_clock: WatermarkClock | None = None,
        metrics_listener: socket.socket | None = None,
    ) -> None:
        self.settings = settings
        self.state = state or MetricsState()
        tel.UP.set(self.state, tel.Version(__version__), 1.0)
        self.workers = _delivery_workers(settings)
        self.source = source
        self.sink = sink
        self.pipeline = Pipeline(
            settings,
            source,
            runtimes,
            build_sampler(settings),
            state=self.state,
            sink=sink,
            clock=clock,
            on_alert=self._deliver,
        )
        self.pipeline.alert_workers = self.workers
        #: the clock a model's windows and alerts read: max(event-time watermark, wall time −
        #: alerts.allowed_lag_seconds), one per model so that one producer's timestamps cannot stall another model's
        #: alerts; a caller's clock (a replay, the demo: the watermark alone) is shared by every model
        self.alert_clock = alert_clock
        for rt in self.pipeline.runtimes.values():
            if rt.watch is not None:
                rt.watch.clock = (
                    alert_clock
                    if alert_clock is not None
                    else WatermarkClock(
                        settings.alerts.allowed_lag_seconds,
                        wall=clock,
                        max_skew_seconds=settings.alerts.max_event_skew_seconds,
                    )
                )
                if rt.accuracy_fit is not None and rt.watch.accuracy_fit is None:
                    rt.watch.set_accuracy_fit(rt.accuracy_fit)
        self.pipeline.publish()
        from monitor.probes.scheduler import ProbeScheduler

        self.probes = ProbeScheduler(self.pipeline, settings.probes, clock=clock)
        #: the cyclic GC by time too, so that garbage does not wait for 50,000 allocations (monitor/allocator.py)
        self.collector = TimedCollector()
        #: the HTTP endpoint in a process of its own (monitor/exporters/http_process.py): scrapers never take this
        #: interpreter; the loop's tick publishes the rendered snapshot to it
        self.server: ProcessMetricsServer | None = None
        if serve_metrics:
            self.server = ProcessMetricsServer(
                self.state,
                settings=settings.metrics,
                published=Published(
                    ready=self.pipeline.readiness,
                    probes=self.probes.report,
                    documents={"gammamap": lambda: gamma_map_document(self.pipeline.runtimes)},
                ),
                log_level=settings.log_level,
                log_format=settings.log_format,
                listener=metrics_listener,
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> Service:
        # the metrics port first: one that is taken refuses the start before a model loads or the consumer joins
        # its group (a crash-looping replica would otherwise cost the healthy ones a rebalance per start)
        listener = listen(settings.metrics.host, settings.metrics.port)
        try:
            return cls._assemble(settings, listener)
        except BaseException:
            listener.close()
            raise

    @classmethod
    def _assemble(cls, settings: Settings, listener: socket.socket) -> Service:
        from monitor.source.kafka import KafkaSource
        from monitor.source.kafka_config import ConsumerConfig, ProducerConfig
        from monitor.source.kafka_process import ProcessKafkaSource
        from monitor.source.kafka_sink import KafkaSink

        runtimes = [load_model_runtime(m, segment_column=settings.segments.reference_column) for m in settings.models]
        k = settings.kafka
        rebalance = _Rebalance()
        consumer = ConsumerConfig.from_settings(k)
        source: Source
        if k.use_consumer_process():
            source = ProcessKafkaSource(
                consumer,
                rebalance=rebalance,
                log_level=settings.log_level,
                log_format=settings.log_format,
                client=k.client,
            )
        elif k.client == "librdkafka":
            from monitor.source.rdkafka import RdKafkaSource

            source = RdKafkaSource(consumer, rebalance=rebalance)
        else:
            source = KafkaSource(consumer, rebalance=rebalance)
        sink = None
        if k.dead_letter_topic or k.scores_topic:
            sink = KafkaSink(
                ProducerConfig.from_settings(k),
                new_producer=functools.partial(_rd_producer, k) if k.client == "librdkafka" else None,
            )
        svc = cls(settings, source, runtimes, sink=sink, metrics_listener=listener)
        rebalance.target = svc.pipeline
        return svc

    def _deliver(self, event: AlertEvent) -> None:
        for w in self.workers:
            w.submit(event)

    def __enter__(self) -> Service:
        for w in self.workers:
            w.start()
        if self.server is not None:
            self.server.start()
            log.info("metrics endpoint up", extra={"port": self.server.port})
        return self

    def run(
        self, stop: threading.Event, *, until_exhausted: bool = False, tick: Callable[[], None] | None = None
    ) -> None:
        def _tick() -> None:
            self.tick()
            if tick is not None:
                tick()

        self.pipeline.run(stop, until_exhausted=until_exhausted, tick=_tick)

    def tick(self, *, publish_now: bool = False) -> None:
        """The upkeep of one loop turn, after every ``pipeline.step``: the GC by time, the probes, readiness, the
        alerts on the clock, the delivery counters, and the snapshot the HTTP process serves (published once per
        ``metrics.min_render_interval_seconds``, or now with ``publish_now``). :meth:`run` calls it; so does a caller
        that steps the pipeline itself (the demo), and one that keeps serving after the last event (the demo's
        ``--linger``)."""
        self.collector.maybe_collect()
        self.probes.tick()
        self.pipeline.readiness()  # keeps harmonic_ready current even when nothing polls /readyz
        self.pipeline.tick_alerts()  # alerts fire and resolve on the clock, events or not
        self._export_delivery_counters()
        if self.server is not None:
            self.server.publish(force=publish_now)

    def _export_delivery_counters(self) -> None:
        for w in self.workers:
            tel.ALERT_DELIVERIES_FAILED_TOTAL.set_total(self.state, tel.Receiver(w.name), float(w.failed_total))
        # the Kafka sink's own monotone counts (monitor/source/kafka_sink.py KafkaSink), by topic_kind (and drop reason)
        if not isinstance(self.sink, ProducerCounts):
            return
        for kind, n in self.sink.failed_total.items():
            tel.PRODUCER_FAILURES_TOTAL.set_total(self.state, tel.TopicKind(kind), float(n))
        for labels, n in self.sink.dropped_total.items():
            tel.PRODUCER_DROPPED_TOTAL.set_total(self.state, tel.TopicKindReason(*labels), float(n))

    def __exit__(self, *exc: object) -> None:
        for w in self.workers:
            w.stop(timeout_seconds=5.0)
        self.source.close()
        if self.sink is not None:
            self.sink.close()
        if self.server is not None:
            self.server.close()

    def describe(self) -> dict[str, Any]:
        return {"models": [rt.model.describe() for rt in self.pipeline.runtimes.values()]}
