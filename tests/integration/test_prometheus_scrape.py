"""A real Prometheus scrapes a real sidecar's ``/metrics`` and evaluates ``deploy/prometheus/harmonic-rules.yml``.

The sidecar is the production :class:`~monitor.runtime.service.Service` (decode → sample → score with a tiny ONNX model →
windows/drift → :class:`~monitor.exporters.http.MetricsServer`) fed by a looping, rate-limited
:class:`~monitor.source.replay.ReplaySource`, so its counters and histograms keep moving while Prometheus (the
Debian ``prometheus`` binary, started on a free loopback port with a 1 s scrape and evaluation interval) reads
them. The tests ask Prometheus' HTTP API what it stored: raw counters, ``histogram_quantile`` over the γ
histogram, our recording rules, and every rule of the file loaded with health ``ok``.

The binary comes from ``bash scripts/install-prometheus.sh``; without it the tests fail with that command —
they are never skipped.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np
import pytest
import yaml

from monitor.config import Settings, load_settings
from monitor.gammamap import GAMMA_EDGES, gamma_bin_labels
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.source.replay import ReplaySource
from tests.integration.alertmanager_service import free_port, log_tail, start_logged, stop_process
from tests.unit import onnx_graphs

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "harmonic-rules.yml"
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
#: Grafana's variables, replaced by what a user selecting "All" (and the 300 s window) would send
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
    "$model": ".*",
    "$segment": ".*",
    "$window": "300s",
    "$method": "atc",
}
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
INSTALL_HINT = "Install it with `bash scripts/install-prometheus.sh` (Debian package prometheus)."
#: every wait below is bounded by this (Prometheus start, first scrapes, first rule evaluations)
DEADLINE_SECONDS = 60.0

CONFIG_TEMPLATE = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: harmonic-monitor
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
"""


def _opener() -> urllib.request.OpenerDirector:
    # loopback only: never route through an HTTP(S)_PROXY from the environment
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PrometheusService:
    """Runs ``/usr/bin/prometheus`` on 127.0.0.1 for a ``with`` block, scraping one target with our rules.

    Parameters
    ----------
    target_port : int
        Port of the ``/metrics`` endpoint on 127.0.0.1.
    rules : Path
        Rule file to load.
    binary : str
        Prometheus executable.

    Raises
    ------
    RuntimeError
        If the binary is missing (with the install command), exits early or is not ready in time (with its log).
    """

    def __init__(self, target_port: int, rules: Path = RULES, *, binary: str = PROMETHEUS) -> None:
        self.binary = binary
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._config = CONFIG_TEMPLATE.format(rules=json.dumps(str(rules)), target_port=target_port)
        self._opener = _opener()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    def __enter__(self) -> Self:
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError(f"Prometheus binary not found at {self.binary}. {INSTALL_HINT}")
        self._tmp = tempfile.TemporaryDirectory(prefix="prometheus-test-")
        tmp = Path(self._tmp.name)
        config = tmp / "prometheus.yml"
        config.write_text(self._config, encoding="utf-8")
        self._log_path = tmp / "prometheus.log"
        self._process = start_logged(
            [
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            self._log_path,
        )
        try:
            self.wait_for(self._ready, "Prometheus /-/ready")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stop_process(self._process)
        self._process = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def log(self) -> str:
        """Prometheus' own log so far (for failure messages)."""
        return log_tail(self._log_path)

    def _ready(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"Prometheus exited with {self._process.returncode}:\n{self.log()}")
        try:
            with self._opener.open(f"{self.url}/-/ready", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``; the ``data`` of a successful answer."""
        query = urllib.parse.urlencode(params)
        with self._opener.open(f"{self.url}/api/v1/{path}?{query}", timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait_for(self, check: Callable[[], Any], what: str, timeout_seconds: float = DEADLINE_SECONDS) -> Any:
        """Poll ``check`` until it returns something truthy; AssertionError naming ``what`` after the deadline."""
        deadline = time.monotonic() + timeout_seconds
        last: Any = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(0.2)  # bounded polling of an external process
        raise AssertionError(f"{what}: nothing within {timeout_seconds} s (last: {last!r})\n{self.log()}")

    def wait_for_samples(self, promql: str, accept: Callable[[float], bool] = math.isfinite) -> list[dict[str, Any]]:
        """Poll an instant query until it has samples and ``accept`` holds for every value (default: finite)."""

        def accepted() -> list[dict[str, Any]]:
            result = self.query(promql)
            return result if result and all(accept(float(s["value"][1])) for s in result) else []

        result: list[dict[str, Any]] = self.wait_for(accepted, f"samples of {promql!r} satisfying {accept.__name__}")
        return result


def _events(n: int, seed: int) -> list[bytes]:
    """Events for a 2-feature, 3-class model (live label always given); every 50th line is invalid."""
    rng = np.random.default_rng(seed)
    now_ms = int(time.time() * 1000)
    lines: list[bytes] = []
    for i in range(n):
        if i % 50 == 49:
            lines.append(b"not json" if i % 100 == 99 else b'{"id": "short", "model": "credit", "features": [1.0]}')
            continue
        event = {
            "id": f"e{i}",
            "ts": now_ms + i,
            "model": "credit",
            "model_version": "3",
            "features": rng.normal(0.0, 1.5, 2).tolist(),
            "prediction": {"label": int(rng.integers(0, 3))},
            "segment": ("eu", "us")[i % 2],
        }
        lines.append(json.dumps(event).encode())
    return lines


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The production service with ``/metrics`` on a free loopback port, scoring a looping replay at 400 ev/s."""
    tmp = tmp_path_factory.mktemp("sidecar")
    model = onnx_graphs.linear_classifier(
        tmp / "credit.onnx", [[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]], [0.1, 0.0, -0.2], curvature=[0.4, -0.3, 0.1]
    )
    np.save(tmp / "reference.npy", np.random.default_rng(0).normal(0.0, 1.5, (400, 2)))
    # a candidate beside it (models[].compare_with): the harmonic_compare_* series and the dashboard's row
    candidate = onnx_graphs.linear_classifier(
        tmp / "credit-v2.onnx", [[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]], [0.1, 0.0, -0.2], curvature=[0.9, -0.6, 0.3]
    )
    settings = load_settings(
        None,
        {
            "models": [
                {"name": "credit", "path": str(model), "reference": str(tmp / "reference.npy")},
                {"name": "credit-v2", "path": str(candidate), "compare_with": "credit"},
            ],
            "sampler": {"events_per_second": 0},
            "batch": {"max_events": 64, "max_wait_ms": 50},
            "drift": {"window": 100, "every": 50},
            "metrics": {"host": "127.0.0.1", "port": 0},
            "state_dir": str(tmp / "state"),
        },
    )
    with serving(settings, "sidecar") as service:
        yield service


@contextlib.contextmanager
def serving(settings: Settings, thread_name: str) -> Iterator[Service]:
    """The production service for ``settings``, scoring a looping replay of 2,000 events at 400 ev/s on a thread
    of its own; stopped on exit, which must take under 30 s."""
    source = ReplaySource(_events(2000, seed=1), rate=400.0, loop=True)
    service = Service(settings, source, [load_model_runtime(m) for m in settings.models], serve_metrics=True)
    stop = threading.Event()
    with service:
        worker = threading.Thread(target=service.run, args=(stop,), name=thread_name, daemon=True)
        worker.start()
        try:
            yield service
        finally:
            stop.set()
            worker.join(30)
    assert not worker.is_alive(), "the sidecar did not stop within 30 s of its stop event"


@pytest.fixture(scope="module")
def prometheus(sidecar: Service) -> Iterator[PrometheusService]:
    assert sidecar.server is not None
    with PrometheusService(sidecar.server.port) as prom:
        yield prom


def test_prometheus_scrapes_the_sidecar_target_without_errors(prometheus: PrometheusService) -> None:
    def healthy_target() -> list[dict[str, Any]]:
        targets = prometheus.api("targets", state="active")["activeTargets"]
        return [t for t in targets if t["health"] == "up"]

    (target,) = prometheus.wait_for(healthy_target, "target health 'up'")
    assert target["labels"]["job"] == "harmonic-monitor"
    assert target["lastError"] == ""


def test_prometheus_stores_the_consumed_events_counter(prometheus: PrometheusService) -> None:
    result = prometheus.wait_for(
        lambda: [s for s in prometheus.query('harmonic_events_consumed_total{model="credit"}') if float(s["value"][1])],
        "harmonic_events_consumed_total > 0",
    )
    assert [s["metric"]["model"] for s in result] == ["credit"]
    assert all(s["metric"]["job"] == "harmonic-monitor" for s in result)


def test_prometheus_computes_a_gamma_p95_from_the_histogram(prometheus: PrometheusService) -> None:
    (sample,) = prometheus.wait_for_samples("histogram_quantile(0.95, sum by (le) (rate(harmonic_gamma_bucket[30s])))")
    p95 = float(sample["value"][1])
    assert 0.0 <= p95 <= 1.0, f"γ of a probability lies in [0, 1]; Prometheus computed p95 = {p95}"


def test_prometheus_stores_confidence_and_margin_between_their_bounds(prometheus: PrometheusService) -> None:
    conf = "(sum(rate(harmonic_confidence_sum[30s])) / sum(rate(harmonic_confidence_count[30s])))"
    margin = "(sum(rate(harmonic_margin_sum[30s])) / sum(rate(harmonic_margin_count[30s])))"
    (c,) = prometheus.wait_for_samples(conf)
    assert 1 / 3 <= float(c["value"][1]) <= 1.0, c  # a 3-class model's mean max-probability
    # per event top-1 − top-2 lies in [2·top-1 − 1, top-1], so the means do too (each query at one instant)
    prometheus.wait_for_samples(f"{margin} - (2 * {conf} - 1)", lambda v: v >= -1e-9)
    prometheus.wait_for_samples(f"{conf} - {margin}", lambda v: v >= -1e-9)


def test_recording_rules_produce_series_from_the_real_metrics(prometheus: PrometheusService) -> None:
    p95 = prometheus.wait_for_samples("model_segment:harmonic_gamma:p95_5m")
    assert {(s["metric"]["model"], s["metric"]["segment"]) for s in p95} == {("credit", "eu"), ("credit", "us")}
    ratio = prometheus.wait_for_samples("model:harmonic_shadow_disagreement:ratio_rate15m")
    assert 0.0 <= float(ratio[0]["value"][1]) <= 1.0

    def positive(value: float) -> bool:
        return value > 0

    (invalid,) = prometheus.wait_for_samples("instance:harmonic_events_invalid:ratio_rate5m", positive)
    assert float(invalid["value"][1]) == pytest.approx(1 / 50, rel=0.5)  # every 50th line of the replay


def test_every_rule_of_the_file_is_loaded_and_evaluates_ok(prometheus: PrometheusService) -> None:
    declared = {
        rule.get("record") or rule["alert"]
        for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
        for rule in group["rules"]
    }

    def evaluated() -> list[dict[str, Any]]:
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        return rules if rules and all(r["health"] != "unknown" for r in rules) else []

    rules = prometheus.wait_for(evaluated, "every rule evaluated at least once")
    assert {r["name"] for r in rules} == declared
    broken = {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"}
    assert not broken, f"rules with errors: {broken}"


def _dashboard_queries(node: Any) -> Iterator[str]:
    """Every PromQL expression in a dashboard: panel targets (rows included), annotations, variable queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            elif key == "definition" and isinstance(value, str) and value.startswith("label_values("):
                yield value.removeprefix("label_values(").rsplit(",", 1)[0]  # the series selector
            else:
                yield from _dashboard_queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dashboard_queries(item)


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=[d.name for d in DASHBOARDS])
def test_every_dashboard_query_runs_in_prometheus(prometheus: PrometheusService, dashboard: Path) -> None:
    queries = sorted(set(_dashboard_queries(json.loads(dashboard.read_text(encoding="utf-8")))))
    assert len(queries) > 20, f"{dashboard.name}: expected the panels' queries; found {queries}"
    errors: dict[str, str] = {}
    for query in queries:
        promql = query
        for variable, value in GRAFANA_VARIABLES.items():
            promql = promql.replace(variable, value)
        assert "$" not in promql, f"unknown Grafana variable in {query!r}"
        try:
            prometheus.query(promql)
        except urllib.error.HTTPError as exc:  # 400 bad_data: the expression does not parse or type-check
            errors[query] = exc.read().decode(errors="replace")
    assert not errors, f"{dashboard.name}: queries Prometheus rejects: {json.dumps(errors, indent=2)}"


#: the panels that answer "what moved" (grafana/dashboards/harmonic-overview.json), each with data from this sidecar
WHAT_MOVED_PANELS = (58, 59, 60, 61, 62)


def _substituted(query: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    return query


def test_the_what_moved_panels_draw_the_sidecar_s_series(prometheus: PrometheusService) -> None:
    dashboard = json.loads((REPO / "grafana" / "dashboards" / "harmonic-overview.json").read_text(encoding="utf-8"))
    panels = {p["id"]: p for p in dashboard["panels"]}
    for panel_id in WHAT_MOVED_PANELS:
        first = panels[panel_id]["targets"][0]["expr"]  # each panel's first query has a line to draw
        prometheus.wait_for_samples(_substituted(first))
    per_input = prometheus.wait_for_samples(_substituted(panels[58]["targets"][0]["expr"]))
    assert {s["metric"]["feature"] for s in per_input} <= {"x[0]", "x[1]"}, per_input  # the model's input names
    assert all(0.0 <= float(s["value"][1]) <= 1.0 for s in per_input)
    verdicts = prometheus.wait_for_samples(_substituted(panels[24]["targets"][0]["expr"]))
    assert {float(s["value"][1]) for s in verdicts} <= {-1.0, 0.0, 1.0, 2.0}


def test_the_confidence_rule_panel_draws_each_model_s_rule(prometheus: PrometheusService) -> None:
    """A classifier whose reference holds no labels keeps a fall in its confidence as harm evidence: 1 on /metrics,
    stored by Prometheus, drawn by the panel beside the estimate."""
    dashboard = json.loads((REPO / "grafana" / "dashboards" / "harmonic-overview.json").read_text(encoding="utf-8"))
    panel = next(p for p in dashboard["panels"] if p["title"] == "Confidence counts as harm evidence")
    rules = prometheus.wait_for_samples(_substituted(panel["targets"][0]["expr"]))
    assert {s["metric"]["model"]: float(s["value"][1]) for s in rules}.get("credit") == 1.0, rules


def test_the_gamma_map_heatmaps_draw_the_model_s_own_gamma_bins(
    sidecar: Service, prometheus: PrometheusService
) -> None:
    """The reference (400 scored rows) brings the model's γ edges; the scraped cells and both heatmap panels, as
    Grafana queries them for that model, carry its own ``gamma_bin`` values, at most 11."""
    watch = sidecar.pipeline.runtimes["credit"].watch
    assert watch is not None and watch.reference is not None
    edges = watch.reference.gamma_edges
    assert edges != GAMMA_EDGES, "400 reference rows are enough for the model's own edges"
    own = set(gamma_bin_labels(edges))
    assert len(own) <= 11
    dashboard = json.loads((REPO / "grafana" / "dashboards" / "harmonic-overview.json").read_text(encoding="utf-8"))
    panels = {p["id"]: p for p in dashboard["panels"]}
    # the all-P and the low-P heatmap, each repeated per model: Grafana sends them with $model set to one model
    all_p, low_p = (_substituted(panels[i]["targets"][0]["expr"].replace("$model", "credit")) for i in (54, 55))
    rows = prometheus.wait_for_samples(all_p, lambda v: v > 0)
    assert {s["metric"]["gamma_bin"] for s in rows} <= own, (rows, own)
    assert {s["metric"]["gamma_bin"] for s in prometheus.query(low_p)} <= own
    cells = prometheus.wait_for_samples('sum by (gamma_bin) (harmonic_gammamap_events_total{model="credit"})')
    assert {s["metric"]["gamma_bin"] for s in cells} <= own, (cells, own)


def test_prometheus_stores_the_candidate_comparison(prometheus: PrometheusService) -> None:
    """The candidate's verdict (one of four at 1 per segment) and its paired differences reach Prometheus."""
    verdicts = prometheus.wait_for_samples('harmonic_compare_verdict{candidate="credit-v2"} == 1')
    assert {s["metric"]["segment"] for s in verdicts} == {"eu", "us"}
    assert {s["metric"]["verdict"] for s in verdicts} <= {
        "candidate-better",
        "candidate-worse",
        "no-difference",
        "incomparable",
    }
    rates = prometheus.wait_for_samples(
        'harmonic_compare_disagreement_ratio{candidate="credit-v2", window="60s"}', lambda v: 0.0 <= v <= 1.0
    )
    assert {s["metric"]["segment"] for s in rates} == {"eu", "us"}
    spans = prometheus.wait_for_samples(
        'harmonic_compare_difference_upper{axis="gamma"} - harmonic_compare_difference_lower{axis="gamma"}',
        lambda v: v >= 0.0,
    )
    assert spans


def test_promtool_accepts_the_rules_and_their_unit_tests() -> None:
    if not os.access(PROMTOOL, os.X_OK):
        raise RuntimeError(f"promtool not found at {PROMTOOL}. {INSTALL_HINT}")
    for args in (
        ["check", "rules", str(RULES)],
        ["test", "rules", str(RULES.with_name("harmonic-rules.test.yml"))],
        ["check", "config", str(REPO / "deploy" / "compose" / "prometheus.yml")],
    ):
        done = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"promtool {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
