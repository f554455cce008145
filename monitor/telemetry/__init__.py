"""Every Prometheus series the sidecar exports, declared once: name, type, help, labels (and buckets).

Each series is a typed handle: its labels are a :class:`~typing.NamedTuple` whose fields are the label names, so
a write with a missing or extra label fails at the call and in mypy::

    EVENTS_INVALID_TOTAL.inc(state, ModelReason("credit", "not_json"))

The values live in :class:`~monitor.exporters.prometheus.MetricsState` (plain numpy behind one lock, read by a
pull-based collector at scrape time: the hot path never touches prometheus_client). :data:`METRICS` is the list
``docs/METRICS.md`` is generated from (``scripts/gen_metrics_doc.py``), each series with the usage note of its
declaration (``group``, ``unit``, ``use``). No module outside this package spells a series name; tests and scripts
take ``HANDLE.name`` from here.

The package is a catalogue: :mod:`~monitor.telemetry.series` holds the label sets, the handle types and the buckets;
the others declare the series by the section of ``docs/METRICS.md`` they fall under: :mod:`~.pipeline` (traffic, the
per-event signals, the shadow check, cost), :mod:`~.windows` (rolling windows, drift, alerts), :mod:`~.probes`,
:mod:`~.accuracy` (labels and the estimates) and :mod:`~.service` (the process, the candidate, HTTP). Every name is
re-exported here, so callers write ``from monitor import telemetry as tel`` and ``tel.EVENTS_CONSUMED_TOTAL``.
"""

from __future__ import annotations

# isort: off
# the declaration modules in this order: the order they register their series is the order of METRICS
from monitor.telemetry.series import *  # noqa: F403
from monitor.telemetry.series import _DECLARED, MetricSpec
from monitor.telemetry.pipeline import *  # noqa: F403
from monitor.telemetry.windows import *  # noqa: F403
from monitor.telemetry.probes import *  # noqa: F403
from monitor.telemetry.accuracy import *  # noqa: F403
from monitor.telemetry.service import *  # noqa: F403

# isort: on

#: every series, in declaration order (the order docs/METRICS.md and the scrape list them)
METRICS: tuple[MetricSpec, ...] = tuple(_DECLARED)
