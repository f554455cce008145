"""The Gamma Map in the service: per model and segment in the watch, its Prometheus cells, the reference's map, and
``/gammamap`` (JSON and SVG) through the HTTP server."""

from __future__ import annotations

import http.client
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.config import MetricsSettings
from monitor.events import InferenceEvent
from monitor.exporters.http import MetricsServer, Routes
from monitor.exporters.prometheus import MetricsState
from monitor.gammamap import (
    GAMMA_BIN_LABELS,
    GAMMA_EDGES,
    P_BIN_LABELS,
    GammaMap,
    bin_indices,
    gamma_bin_labels,
    gamma_map,
    model_gamma_edges,
)
from monitor.rolling.reference import Reference
from monitor.rolling.segment_baselines import MIN_SEGMENT_ROWS
from monitor.rolling.windows import OTHER
from monitor.runtime.gammamap_view import gamma_map_document_handler, gamma_map_handler
from monitor.runtime.models import ModelRuntime
from monitor.runtime.watch import ModelWatch, WatchConfig
from monitor.signals.scorer import ScoreResult
from tests.unit.fanned_watch import fanned_watch

MODEL = "clf"


def scored(
    p: np.ndarray, gamma: np.ndarray, *, segment: str = "all", start: int = 0
) -> tuple[list[InferenceEvent], np.ndarray, ScoreResult, np.ndarray]:
    n = p.size
    x = np.zeros((n, 2))
    events = [InferenceEvent(f"e{start + i}", MODEL, "1", x[i], 1000.0 + start + i, segment=segment) for i in range(n)]
    result = ScoreResult(
        gamma=gamma,
        flicker=np.zeros(n),
        p_adj=p * np.exp(-25 * gamma),
        gamma_logit=gamma,
        predicted_class=np.zeros(n, dtype=np.int64),
        probability=p,
        valid=np.ones(n, dtype=bool),
        margin=2 * p - 1,
    )
    return events, x, result, np.full(n, np.nan)


def make_watch(count_window_events: int = 100, max_segments: int = 20) -> tuple[ModelWatch, MetricsState]:
    state = MetricsState()
    config = WatchConfig(count_window_events=count_window_events, max_segments=max_segments, warmup_events=10_000)
    return fanned_watch(MODEL, config, state), state


def test_watch_keeps_a_live_map_per_segment_and_counts_its_cells() -> None:
    watch, state = make_watch(count_window_events=100)
    rng = np.random.default_rng(0)
    p1, g1 = rng.uniform(0.5, 1, 150), 10 ** rng.uniform(-4, -1, 150)
    p2, g2 = rng.uniform(0.3, 0.6, 40), 10 ** rng.uniform(-1, 0.5, 40)
    watch.update(*scored(p1[:80], g1[:80], segment="a"))
    watch.update(*scored(p1[80:], g1[80:], segment="a", start=80))
    watch.update(*scored(p2, g2, segment="b", start=200))
    out = watch.gamma_maps()
    assert out["window_events"] == 100
    assert GammaMap.from_json(out["segments"]["a"]) == gamma_map(p1[-100:], g1[-100:])
    assert GammaMap.from_json(out["segments"]["b"]) == gamma_map(p2, g2)
    assert out["total"] == 140  # the merged live map
    assert GammaMap.from_json(out["cumulative"]).total == 190
    assert out["reference"] is None and out["reference_note"] == "no reference yet (warming up)"
    # every event lands in exactly one Prometheus cell, labelled from the fixed sets
    assert state.counter_sum(tel.GAMMAMAP_EVENTS_TOTAL.name) == 190
    full = gamma_map(p1, g1)
    for i, row in enumerate(full.counts):
        for j, c in enumerate(row):
            if c:
                labels = (MODEL, "a", P_BIN_LABELS[i], GAMMA_BIN_LABELS[j])
                assert state.counter(tel.GAMMAMAP_EVENTS_TOTAL.name, labels) == c
    assert watch.gamma.segments() == ["a", "b"]
    live, ref = watch.gamma_map_pair("b")
    assert live == gamma_map(p2, g2) and ref is None


def test_watch_folds_segments_beyond_the_bound_and_ignores_regressors() -> None:
    watch, state = make_watch(max_segments=2)
    for k, seg in enumerate(("a", "b", "c", "d")):
        watch.update(*scored(np.full(3, 0.9), np.full(3, 0.01), segment=seg, start=10 * k))
    assert watch.gamma.segments() == ["a", "b", "other"]
    assert watch.gamma_maps()["segments"]["other"]["total"] == 6
    reg, reg_state = make_watch()
    reg.update(*scored(np.full(3, np.nan), np.full(3, 0.01)))
    assert reg.gamma.segments() == [] and reg_state.counter_sum(tel.GAMMAMAP_EVENTS_TOTAL.name) == 0


def test_watch_serves_the_reference_map_beside_the_live_one() -> None:
    rng = np.random.default_rng(1)
    conf, gamma = rng.uniform(0.6, 1, 300), rng.exponential(1e-3, 300)
    ref = Reference.from_arrays(gamma=gamma, flicker=np.zeros(300), features=rng.normal(size=(300, 2)), confidence=conf)
    assert ref.gamma_map == gamma_map(conf, gamma, gamma_edges=model_gamma_edges(gamma))
    assert ref.gamma_edges == model_gamma_edges(gamma) != GAMMA_EDGES
    assert Reference.from_dict(json.loads(json.dumps(ref.to_dict()))).gamma_map == ref.gamma_map
    old = {k: v for k, v in ref.to_dict().items() if k != "gamma_map"}  # written before the map was kept
    assert Reference.from_dict(old).gamma_map is None
    watch, _ = make_watch()
    watch.install_reference(ref)
    out = watch.gamma_maps()
    assert out["reference"]["counts"] == ref.gamma_map.counts and out["reference_note"] is None
    assert "the model's own γ edges" in out["gamma_edges_note"]
    watch.install_reference(Reference.from_dict(old))
    assert "holds no Gamma Map" in watch.gamma_maps()["reference_note"]
    assert watch.gamma.gamma_edges == GAMMA_EDGES  # an old file without a map: the fixed grid
    no_conf = Reference.from_arrays(gamma=gamma, flicker=np.zeros(300), features=rng.normal(size=(300, 2)))
    assert no_conf.gamma_map is None


def test_the_reference_brings_the_model_s_edges_and_labels() -> None:
    """Events counted on the fixed grid before the reference are re-binned onto its edges; the Prometheus cells
    from then on carry the model's own gamma_bin labels, at most 11 of them."""
    rng = np.random.default_rng(2)
    conf, gamma = rng.uniform(0.6, 1, 400), rng.exponential(1e-3, 400)
    ref = Reference.from_arrays(gamma=gamma, flicker=np.zeros(400), features=rng.normal(size=(400, 2)), confidence=conf)
    watch, state = make_watch(count_window_events=100)
    p1, g1 = rng.uniform(0.6, 1, 60), rng.exponential(1e-3, 60)
    watch.update(*scored(p1, g1, segment="a"))
    watch.install_reference(ref)
    edges = ref.gamma_edges
    assert GammaMap.from_json(watch.gamma_maps()["segments"]["a"]) == gamma_map(p1, g1, gamma_edges=edges)
    p2, g2 = rng.uniform(0.6, 1, 30), np.r_[rng.exponential(1e-3, 29), [1.0]]  # the last beyond the reference
    watch.update(*scored(p2, g2, segment="a", start=60))
    out = watch.gamma_maps()
    live = GammaMap.from_json(out["segments"]["a"])
    assert live == gamma_map(np.r_[p1, p2], np.r_[g1, g2], gamma_edges=edges)
    assert live.counts[len(live.counts) - 1][-1] + sum(r[-1] for r in live.counts[:-1]) == 1  # the open last bin
    assert GammaMap.from_json(out["cumulative"]).total == 90  # restarted from the re-binned window, then 30 more
    labels = gamma_bin_labels(edges)
    assert out["gamma_bins"] == list(labels) and 2 <= len(labels) <= 11 and sorted(labels) == list(labels)
    bins = {r["labels"][3] for r in state.dump_counters() if r["name"] == tel.GAMMAMAP_EVENTS_TOTAL.name}
    own = bins - set(GAMMA_BIN_LABELS)  # the 60 events before the reference were counted on the fixed grid
    assert own and own <= set(labels)
    for i, row in enumerate(gamma_map(p2, g2, gamma_edges=edges).counts):
        for j, c in enumerate(row):
            if c:
                assert state.counter(tel.GAMMAMAP_EVENTS_TOTAL.name, (MODEL, "a", P_BIN_LABELS[i], labels[j])) == c


def runtimes(*watches: tuple[str, ModelWatch | None, str]) -> dict[str, ModelRuntime]:
    """Stand-ins for ModelRuntime: the handler reads only ``watch`` and ``model.kind``."""
    return {
        name: cast(ModelRuntime, SimpleNamespace(watch=w, model=SimpleNamespace(kind=kind)))
        for name, w, kind in watches
    }


def test_handler_json_and_svg() -> None:
    watch, _ = make_watch()
    watch.update(*scored(np.array([0.95, 0.35]), np.array([0.002, 0.5]), segment="s1"))
    other, _ = make_watch()
    handle = gamma_map_handler(runtimes((MODEL, watch, "classifier"), ("reg", other, "regressor")))
    status, body, ctype = handle({})
    assert status == 200 and ctype == "application/json"
    data = json.loads(body)
    assert list(data["models"]) == [MODEL]  # regressors have no map, and the document says why
    assert "a regressor" in data["not_drawn"]["reg"] and "probability" in data["not_drawn"]["reg"]
    m = data["models"][MODEL]
    assert len(m["counts"]) == len(m["p_edges"]) - 1 and len(m["counts"][0]) == len(m["gamma_edges"]) - 1
    assert m["counts"][9][9] == 1 and m["counts"][3][14] == 1
    status, body, ctype = handle({"format": "svg"})  # one classifier: model may be left out
    assert status == 200 and ctype == "image/svg+xml"
    root = ET.fromstring(body)
    assert "Gamma Map: clf" in "".join(root.itertext())
    assert "the fixed γ edges" in "".join(root.itertext())  # no reference yet: which edges, said under the map
    status, body, _ = handle({"format": "svg", "model": "reg"})
    assert status == 404 and b"no Gamma Map for 'reg': a regressor" in body
    assert handle({"format": "svg", "model": MODEL, "segment": "s1"})[0] == 200
    status, body, _ = handle({"format": "svg", "model": MODEL, "segment": "nope"})
    assert status == 404 and b"segments: s1" in body
    status, body, _ = handle({"format": "svg", "model": "nope"})
    assert status == 404 and b"classifiers: clf" in body
    status, body, _ = handle({"format": "png"})
    assert status == 400 and b"not one of json, svg" in body


def test_handler_svg_needs_a_model_when_several_are_watched() -> None:
    a, _ = make_watch()
    b, _ = make_watch()
    handle = gamma_map_handler(runtimes(("a", a, "classifier"), ("b", b, "classifier"), ("c", None, "classifier")))
    status, body, _ = handle({"format": "svg"})
    assert status == 400 and b"add &model=NAME (classifiers: a, b)" in body


@pytest.fixture
def server() -> Iterator[tuple[MetricsServer, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    def handler(params: Any) -> tuple[int, bytes, str]:
        seen.append(dict(params))
        return 200, b"<svg/>", "image/svg+xml"

    srv = MetricsServer(
        MetricsState(), settings=MetricsSettings(host="127.0.0.1", port=0), routes=Routes(gammamap=handler)
    ).start()
    try:
        yield srv, seen
    finally:
        srv.close()


def _get(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read()
    finally:
        conn.close()


def test_http_server_passes_the_query_to_the_gammamap_handler(
    server: tuple[MetricsServer, list[dict[str, str]]],
) -> None:
    srv, seen = server
    status, ctype, body = _get(srv.port, "/gammamap?format=svg&model=a%20b&segment=")
    assert (status, ctype, body) == (200, "image/svg+xml", b"<svg/>")
    assert seen == [{"format": "svg", "model": "a b", "segment": ""}]


def test_http_server_default_gammamap_is_empty() -> None:
    state = MetricsState()
    with MetricsServer(state, settings=MetricsSettings(host="127.0.0.1", port=0)) as srv:
        status, ctype, body = _get(srv.port, "/gammamap")
    assert status == 200 and json.loads(body) == {"models": {}}
    assert state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("gammamap",)) == 1.0


def test_grafana_low_p_panel_selects_existing_p_bins() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "grafana" / "dashboards" / "harmonic-overview.json"
    panels = json.loads(path.read_text(encoding="utf-8"))["panels"]
    heatmaps = [p for p in panels if any(tel.GAMMAMAP_EVENTS_TOTAL.name in t["expr"] for t in p.get("targets", []))]
    exprs = [t["expr"] for p in heatmaps for t in p["targets"]]
    assert len(exprs) == 2 and all("sum by (gamma_bin)" in e for e in exprs)
    # a model's gamma_bin values are its own: one heatmap per model, never two models' rows in one
    assert all(p["repeat"] == "model" and "$model" in p["title"] for p in heatmaps)
    low = next(e for e in exprs if "p_bin=~" in e)
    assert f'p_bin=~"{"|".join(P_BIN_LABELS[:5])}"' in low


def test_probed_points_give_the_live_map_its_unstable_shares() -> None:
    watch, _ = make_watch()
    watch.update(*scored(np.array([0.95, 0.35, 0.35]), np.array([0.002, 0.5, 0.5]), segment="s"))
    assert watch.gamma_maps()["unstable"] is None  # no probe has run
    watch.gamma.add_probed(
        np.array([0.35, 0.36, 0.95, np.nan]), np.array([0.5, 0.6, 0.002, 0.1]), np.array([1, 0, 0, 1], bool)
    )
    watch.gamma.add_probed(np.array([0.31]), np.array([0.4]), np.array([True]))
    out = watch.gamma_maps()
    assert out["counts"][3][14] == 2  # the live counts are untouched
    assert out["probed"][3][14] == 3 and out["unstable_counts"][3][14] == 2
    assert out["unstable"][3][14] == pytest.approx(2 / 3) and out["unstable"][9][9] == 0.0
    assert out["unstable"][0][0] is None
    live, _ = watch.gamma_map_pair()
    assert live.unstable is not None and live.unstable[3][14] == pytest.approx(2 / 3)
    # points given without their segments count model-wide only
    assert out["segments"]["s"]["unstable"] is None and watch.gamma_map_pair("s")[0].unstable is None


def test_probed_points_count_in_the_segment_of_their_events() -> None:
    watch, _ = make_watch()
    watch.update(*scored(np.array([0.35, 0.35]), np.array([0.5, 0.5]), segment="a"))
    watch.update(*scored(np.array([0.95]), np.array([0.002]), segment="b", start=2))
    p, g = np.array([0.35, 0.36, 0.35, 0.95, 0.31]), np.array([0.5, 0.6, 0.5, 0.002, 0.4])
    watch.gamma.add_probed(p, g, np.array([1, 0, 1, 0, 1], bool), ["a", "a", "b", "b", None])
    out = watch.gamma_maps()
    a, b = out["segments"]["a"], out["segments"]["b"]
    assert a["probed"][3][14] == 2 and a["unstable"][3][14] == pytest.approx(0.5)
    assert b["probed"][3][14] == 1 and b["unstable"][3][14] == 1.0 and b["unstable"][9][9] == 0.0
    assert a["unstable"][9][9] is None and a["counts"] != b["counts"]  # each its own counts and shares
    assert out["probed"][3][14] == 4 and out["unstable"][3][14] == pytest.approx(3 / 4)  # the None point too
    live_a, _ = watch.gamma_map_pair("a")
    assert live_a.unstable is not None and live_a.unstable[3][14] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one segment per point: 1 for 5 points"):
        watch.gamma.add_probed(p, g, np.zeros(5, bool), ["a"])


def test_probed_segments_are_bounded_like_the_maps() -> None:
    watch, _ = make_watch(max_segments=2)
    segs = ["a", "b", "c", "d"]
    watch.gamma.add_probed(np.full(4, 0.35), np.full(4, 0.5), np.array([1, 0, 1, 1], bool), segs)
    with watch.gamma._lock:
        probed = dict(watch.gamma._probed_segments)
    assert sorted(probed) == ["a", "b", OTHER]
    other = probed[OTHER]
    assert other.probed is not None and other.probed[3][14] == 2 and other.unstable_counts is not None
    assert other.unstable_counts[3][14] == 2


def test_a_probe_run_counts_its_algorithm_2_points_into_the_map(tmp_path: Path) -> None:
    from tests.unit.test_probe_scheduler import boundary_events, make, score

    pipeline, probes, clock = make(tmp_path)
    score(pipeline, boundary_events(600, seed=4))
    probed = probes.run_once(clock.now)
    assert probed >= 1
    watch = next(iter(pipeline.runtimes.values())).watch
    assert watch is not None
    out = watch.gamma_maps()
    points = sum(len(rep["adversarial"]["points"]) for rep in probes.report()["models"][MODEL]["reports"])
    assert points > 0
    assert out["probed"] is not None and sum(map(sum, out["probed"])) == points
    assert out["unstable"] is not None


def test_a_probe_run_counts_each_point_in_its_events_segment(tmp_path: Path) -> None:
    from tests.unit.test_pipeline import event
    from tests.unit.test_probe_scheduler import boundary_events, make, score

    pipeline, probes, clock = make(tmp_path)
    # the same boundary events, those near (0, 0.2) in segment "low" and those near (2, 2.2) in "high"
    lines = []
    for raw in boundary_events(600, seed=4):
        doc = json.loads(raw)
        x, label = doc["features"], doc["prediction"]["label"]
        lines.append(event(int(doc["id"][1:]), x, label=label, segment="low" if x[0] < 1 else "high"))
    score(pipeline, lines)
    assert probes.run_once(clock.now) >= 1
    watch = next(iter(pipeline.runtimes.values())).watch
    assert watch is not None
    out = watch.gamma_maps()
    total = sum(map(sum, out["probed"]))
    per_segment = {s: m["probed"] for s, m in out["segments"].items()}
    probed_somewhere = {s for s, grid in per_segment.items() if grid is not None and sum(map(sum, grid))}
    assert total > 0 and probed_somewhere <= {"low", "high"} and probed_somewhere
    assert sum(sum(map(sum, grid)) for grid in per_segment.values() if grid is not None) == total


def test_a_segment_is_drawn_against_its_own_baseline() -> None:
    watch, _ = make_watch()
    k = MIN_SEGMENT_ROWS
    p = np.r_[np.full(k, 0.95), np.full(k, 0.35)]
    g = np.r_[np.full(k, 0.002), np.full(k, 0.5)]
    _, _, result, _ = scored(p, g)
    watch.set_reference(np.zeros((2 * k, 2)), result, segments=np.array(["a"] * k + ["b"] * k))
    watch.update(*scored(np.array([0.95]), np.array([0.002]), segment="b"))
    _, ref_b = watch.gamma_map_pair("b")
    _, ref_all = watch.gamma_map_pair()
    assert ref_b is not None and ref_all is not None
    (pi,), (gi,) = bin_indices(np.array([0.35]), np.array([0.5]), ref_b.gamma_edges)
    assert ref_b.total == k and ref_b.counts[pi][gi] == k  # b's own rows, all at P 0.35, γ 0.5
    # the segment's baseline is binned on the model's edges, so its map and the model's add up cell by cell
    assert ref_b.gamma_edges == ref_all.gamma_edges == model_gamma_edges(g) != GAMMA_EDGES
    assert ref_all.total == 2 * k
    _, ref_new = watch.gamma_map_pair("c")  # no baseline of its own: the model-wide reference
    assert ref_new is not None and ref_new.total == 2 * k


def test_the_svg_draws_a_segment_against_its_own_baseline_and_says_k() -> None:
    watch, _ = make_watch()
    k = MIN_SEGMENT_ROWS
    p = np.r_[np.full(k, 0.95), np.full(k, 0.35)]
    _, _, result, _ = scored(p, np.full(2 * k, 0.01))
    result = replace(result, predicted_class=np.r_[np.zeros(k, np.int64), np.full(k, 2)])  # classes 0 and 2: K ≥ 3
    watch.set_reference(np.zeros((2 * k, 2)), result, segments=np.array(["a"] * k + ["b"] * k))
    watch.update(*scored(np.array([0.95]), np.array([0.01]), segment="b"))
    doc = watch.gamma_maps()
    assert doc["classes"] == 3 and sorted(doc["segment_references"]) == ["a", "b"]
    handle = gamma_map_document_handler(lambda: {"models": {MODEL: doc}})
    status, body, _ = handle({"format": "svg", "segment": "b"})
    texts = " ".join(t.text or "" for t in ET.fromstring(body).iter("{http://www.w3.org/2000/svg}text"))
    assert status == 200 and f"reference (n={k})" in texts  # b's own baseline, not the model's 2k rows
    assert "0.333" in texts  # the P axis starts at 1/K
    status, body, _ = handle({"format": "svg"})
    assert f"reference (n={2 * k})" in body.decode()


def test_a_segment_s_warm_up_baseline_is_binned_on_the_model_s_edges() -> None:
    state = MetricsState()
    config = WatchConfig(count_window_events=100, max_segments=20, warmup_events=200)
    watch = fanned_watch(MODEL, config, state)
    rng = np.random.default_rng(8)
    for k, seg in enumerate(("a", "b")):  # b's γ sits well above a's: its own deciles would differ
        p, g = rng.uniform(0.6, 1, 300), rng.exponential(1e-3 * (1 + 9 * k), 300)
        watch.update(*scored(p, g, segment=seg, start=300 * k))
    assert watch.reference is not None and watch.reference.gamma_edges != GAMMA_EDGES
    assert sorted(watch.segment_references) == ["a", "b"]
    for ref in watch.segment_references.values():
        assert ref.gamma_map is not None and ref.gamma_map.gamma_edges == watch.reference.gamma_edges
