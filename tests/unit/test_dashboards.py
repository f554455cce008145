"""The Grafana dashboards and Prometheus rules name only metrics that exist.

Every ``harmonic_*`` name in ``grafana/dashboards/*.json`` and ``deploy/prometheus/*.yml`` (queries, legends,
descriptions, rule-test series), and in docs/OPERATIONS.md and docs/METRICS.md, must be declared in :data:`monitor.telemetry.METRICS`, a histogram's
``_bucket``/``_sum``/``_count`` series counting as its declaration. Every recording-rule name (``level:metric:ops``)
used in an expression must be recorded by a rule file. A renamed or misspelled metric fails here instead of
drawing an empty panel or an alert that can never fire.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.exporters.prometheus import SPECS

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
RULE_FILES = sorted((REPO / "deploy" / "prometheus").glob("*.yml"))
OPERATIONS = REPO / "docs" / "OPERATIONS.md"
#: prose that names metrics too (METRICS.md's usage notes are hand-written beside each declaration in monitor/telemetry/)
DOCS = [OPERATIONS, REPO / "docs" / "METRICS.md"]
HISTOGRAM_SERIES_SUFFIXES = ("_bucket", "_sum", "_count")

#: a whole metric name: not part of a longer identifier or of a colon-separated recording-rule name
_METRIC = re.compile(r"(?<![A-Za-z0-9_:])harmonic_[a-z0-9_]+(?![A-Za-z0-9_:])")
#: a recording-rule name (level:metric:operations) inside a PromQL expression
_RECORDED = re.compile(r"(?<![A-Za-z0-9_:])[A-Za-z_][A-Za-z0-9_]*:[A-Za-z0-9_:]+")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')


def undeclared_metric_names(text: str) -> set[str]:
    """The ``harmonic_*`` names in ``text`` that :data:`METRICS` does not declare.

    >>> sorted(undeclared_metric_names("rate(harmonic_gamma_bucket[5m]) / harmonic_gama_count"))
    ['harmonic_gama_count']
    """
    unknown = set()
    for name in _METRIC.findall(text):
        if name in SPECS:
            continue
        base = next((name.removesuffix(s) for s in HISTOGRAM_SERIES_SUFFIXES if name.endswith(s)), None)
        if base is not None and base in SPECS and SPECS[base].type == "histogram":
            continue
        unknown.add(name)
    return unknown


def recorded_names_used(expr: str) -> set[str]:
    """Recording-rule names an expression reads (quoted label values ignored).

    >>> sorted(recorded_names_used('model:harmonic_x:rate5m{instance="a:9108"} > 0'))
    ['model:harmonic_x:rate5m']
    """
    return set(_RECORDED.findall(_QUOTED.sub('""', expr)))


def _exprs(node: Any) -> Iterator[str]:
    """Every string under an ``expr`` key, at any depth (panel targets, annotations, rules, rule tests)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _exprs(item)


def _recorded_by_rules() -> set[str]:
    recorded: set[str] = set()
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text(encoding="utf-8")).get("groups", []):
            recorded.update(rule["record"] for rule in group["rules"] if "record" in rule)
    return recorded


def test_dashboards_and_rule_files_are_found() -> None:
    assert [p.name for p in DASHBOARDS] == ["harmonic-overview.json"]
    assert {p.name for p in RULE_FILES} >= {"harmonic-rules.yml"}


@pytest.mark.parametrize("path", DASHBOARDS + RULE_FILES + DOCS, ids=[p.name for p in DASHBOARDS + RULE_FILES + DOCS])
def test_dashboards_and_rules_name_only_declared_metrics(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _METRIC.search(text), f"{path.name} names no harmonic_* metric at all; is the pattern still right?"
    unknown = undeclared_metric_names(text)
    assert not unknown, (
        f"{path.relative_to(REPO)} names metrics that monitor/exporters/prometheus.py METRICS does not declare: "
        f"{sorted(unknown)}. Misspelled, or renamed in METRICS without updating this file?"
    )


@pytest.mark.parametrize("path", DASHBOARDS + RULE_FILES, ids=[p.name for p in DASHBOARDS + RULE_FILES])
def test_recording_rule_names_used_are_recorded(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    used = set().union(*(recorded_names_used(e) for e in _exprs(doc)))
    missing = used - _recorded_by_rules()
    assert not missing, f"{path.relative_to(REPO)} reads recording rules no rule file records: {sorted(missing)}"


def test_undeclared_metric_names_flags_a_misspelled_name() -> None:
    assert undeclared_metric_names('sum(rate(harmonic_events_consumed_totl{model="a"}[5m]))') == {
        "harmonic_events_consumed_totl"
    }


def test_undeclared_metric_names_accepts_histogram_series_only_for_histograms() -> None:
    assert undeclared_metric_names("harmonic_gamma_bucket harmonic_gamma_sum harmonic_gamma_count") == set()
    assert undeclared_metric_names("harmonic_events_scored_total_count") == {"harmonic_events_scored_total_count"}


def test_undeclared_metric_names_ignores_recording_rule_names() -> None:
    assert undeclared_metric_names("model_segment:harmonic_gamma:p95_5m > model:harmonic_nope:rate5m") == set()


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_rule_links_to_a_runbook_section() -> None:
    anchors = {
        _github_anchor(line.lstrip("#"))
        for line in OPERATIONS.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    rules = [
        rule
        for group in yaml.safe_load((REPO / "deploy" / "prometheus" / "harmonic-rules.yml").read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    assert rules
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url.startswith("docs/OPERATIONS.md#"), (rule["alert"], url)
        assert url.split("#", 1)[1] in anchors, f"{rule['alert']}: no section '{url}' in docs/OPERATIONS.md"


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_is_provisioning_ready(path: Path) -> None:
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert dashboard["uid"] and dashboard["id"] is None
    assert variables["datasource"]["type"] == "datasource"
    for name in ("model", "segment"):
        assert variables[name]["definition"].startswith("label_values("), variables[name]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]


#: exported families the overview dashboard does not plot, and why: nothing in them changes for a user to act on
NOT_PLOTTED = {
    # fixed when the model loads (settings or the reference's scales): /metrics, check-config and the reference say them
    "harmonic_flicker_tolerance": "the regressor's flicker tolerance, fixed at load",
    "harmonic_scoring_scale": "σ and r of the scorer, fixed at load",
}


def plotted_families(dashboard: Any) -> set[str]:
    """The metric families a dashboard's queries read (a histogram's series count as its family)."""
    names: set[str] = set()
    for expr in _exprs(dashboard):
        for name in _METRIC.findall(expr):
            base = next((name.removesuffix(s) for s in HISTOGRAM_SERIES_SUFFIXES if name.endswith(s)), name)
            names.add(base if base in SPECS else name)
    return names


def test_the_overview_dashboard_plots_every_family_a_user_acts_on() -> None:
    dashboard = json.loads((REPO / "grafana" / "dashboards" / "harmonic-overview.json").read_text(encoding="utf-8"))
    missing = set(SPECS) - plotted_families(dashboard) - set(NOT_PLOTTED)
    assert not missing, f"families without a panel (add one, or say in NOT_PLOTTED why not): {sorted(missing)}"
    assert not set(NOT_PLOTTED) - set(SPECS), "NOT_PLOTTED names a family that no longer exists"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
