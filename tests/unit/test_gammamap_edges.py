"""A model's own γ edges (deciles of its reference's γ), their labels, and the cases where they fall back."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.errors import DataError
from monitor.gammamap import (
    GAMMA_BIN_LABELS,
    GAMMA_EDGES,
    MIN_EDGE_EVENTS,
    edges_note,
    gamma_bin_labels,
    gamma_map,
    model_gamma_edges,
)
from monitor.gammamap_edges import MODEL_GAMMA_BINS
from monitor.gammamap_window import GammaMapWindow
from monitor.rolling.reference import Reference


def reference(gamma: np.ndarray, *, confidence: bool = True) -> Reference:
    rng = np.random.default_rng(0)
    n = gamma.size
    conf = rng.uniform(0.5, 1.0, n) if confidence else None
    return Reference.from_arrays(gamma=gamma, flicker=np.zeros(n), features=rng.normal(size=(n, 2)), confidence=conf)


def test_the_reference_fills_its_own_deciles_and_leaves_the_open_bin_for_what_lies_beyond() -> None:
    g = np.random.default_rng(1).lognormal(-9.0, 1.0, 2000)  # a tabular model's probabilities: γ near 1e-4
    edges = model_gamma_edges(g)
    assert edges[0] == 0.0 and math.isinf(edges[-1]) and len(edges) - 1 == MODEL_GAMMA_BINS + 1
    assert all(a < b for a, b in zip(edges, edges[1:], strict=False))
    m = reference(g).gamma_map
    assert m is not None and m.gamma_edges == edges
    per_bin = np.asarray(m.counts).sum(axis=0)
    assert per_bin[-1] == 0  # nothing of the reference above its largest γ
    assert np.all(np.abs(per_bin[:-1] / g.size - 0.1) < 0.01)  # deciles, up to the edges' 3 significant digits
    # the fixed grid puts this model in 5 of its 18 columns (beyond 1 % of the events)
    fixed = np.asarray(gamma_map(np.full(g.size, 0.9), g).counts).sum(axis=0)
    assert np.count_nonzero(fixed / g.size > 0.01) <= 5


def test_labels_are_bounded_distinct_and_sort_in_bin_order_whatever_the_scale() -> None:
    for scale in (1e-9, 1e-3, 1.0, 250.0):  # logits at a pixel radius of 100 reach γ of 10 and beyond
        edges = model_gamma_edges(np.random.default_rng(2).exponential(scale, 500))
        labels = gamma_bin_labels(edges)
        assert len(labels) == len(edges) - 1 <= MODEL_GAMMA_BINS + 1
        assert len(set(labels)) == len(labels) and sorted(labels) == list(labels), labels
        assert labels[0].startswith("00:0-") and labels[-1].startswith(f"{len(labels) - 1:02d}:>=")
    assert gamma_bin_labels(GAMMA_EDGES) == GAMMA_BIN_LABELS  # the fixed grid keeps its labels


def test_a_constant_region_gives_one_bin_and_says_so() -> None:
    g = np.r_[np.zeros(400), np.full(100, 1e-15)]  # γ 0 everywhere, up to numerical noise
    edges = model_gamma_edges(g)
    assert edges == (0.0, math.inf) and gamma_bin_labels(edges) == ("00:>=0",)
    ref = reference(g)
    assert ref.gamma_edges == edges and ref.gamma_map is not None and ref.gamma_map.total == 500
    assert "one γ bin" in edges_note(edges) and "constant region" in edges_note(edges)
    live = GammaMapWindow(10, edges).update(np.array([0.9, 0.8]), np.array([0.0, 0.3]))
    assert live.window().counts[9] == [1] and live.window().counts[8] == [1]


def test_a_reference_too_small_for_its_own_edges_keeps_the_fixed_grid_and_says_why() -> None:
    g = np.random.default_rng(3).exponential(1e-3, MIN_EDGE_EVENTS)
    assert model_gamma_edges(g) != GAMMA_EDGES
    small = reference(g[:-1])
    assert small.gamma_edges == GAMMA_EDGES and small.gamma_map is not None
    note = edges_note(small.gamma_map.gamma_edges, small.gamma_map.total)
    assert f"{MIN_EDGE_EVENTS - 1} events" in note and "fixed" in note


def test_an_old_reference_file_loads_on_the_fixed_grid_and_a_regressor_has_no_map() -> None:
    ref = reference(np.random.default_rng(4).exponential(1e-3, 300))
    old = json.loads(json.dumps(ref.to_dict()))
    # written before a model had its own edges: its map is on the fixed grid
    old["gamma_map"] = gamma_map(np.full(300, 0.9), np.asarray(ref.gamma_sample)).to_json()
    loaded = Reference.from_dict(old)
    assert loaded.gamma_edges == GAMMA_EDGES
    assert "written before" in edges_note(loaded.gamma_edges, 300)
    assert Reference.from_dict(json.loads(json.dumps(ref.to_dict()))).gamma_edges == ref.gamma_edges  # round trip
    regressor = reference(np.random.default_rng(5).exponential(1e-3, 300), confidence=False)
    assert regressor.gamma_map is None and regressor.gamma_edges == GAMMA_EDGES
    assert "holds no Gamma Map" in edges_note(None)


def test_maps_on_different_edges_do_not_merge_and_bad_edges_are_refused() -> None:
    own = model_gamma_edges(np.random.default_rng(6).exponential(1e-3, 300))
    a = gamma_map(np.array([0.9]), np.array([1e-3]), gamma_edges=own)
    b = gamma_map(np.array([0.9]), np.array([1e-3]))
    with pytest.raises(DataError, match="different edges cannot be merged.*fixed grid"):
        a.merged(b)
    assert a.merged(a).total == 2
    for bad in ((0.0, 1.0), (0.1, math.inf), (0.0, 0.5, 0.5, math.inf), (math.inf,)):
        with pytest.raises(DataError, match="rise strictly from 0 to \\+inf"):
            gamma_map(np.array([0.9]), np.array([1e-3]), gamma_edges=bad)


def test_a_window_moved_to_other_edges_re_bins_what_it_holds() -> None:
    rng = np.random.default_rng(7)
    p, g = rng.uniform(0.5, 1, 300), rng.exponential(1e-3, 300)
    own = model_gamma_edges(g)
    w = GammaMapWindow(capacity=100)
    w.update(p[:150], g[:150])
    w.set_edges(own)
    assert w.window() == gamma_map(p[50:150], g[50:150], gamma_edges=own)
    assert w.cumulative().total == 100 and int(w.last_added.sum()) == 0  # restarted from the held events
    w.update(p[150:], g[150:])
    assert w.window() == gamma_map(p[-100:], g[-100:], gamma_edges=own)
    assert w.cumulative().total == 250


def test_maps_on_different_edges_are_drawn_side_by_side_without_overlap() -> None:
    import xml.etree.ElementTree as ET

    from monitor.gammamap import render_svg

    own = model_gamma_edges(np.random.default_rng(9).exponential(1e-3, 300))
    live = gamma_map(np.array([0.9]), np.array([1e-3]), gamma_edges=own)
    old = gamma_map(np.array([0.9]), np.array([1e-3]))  # a baseline on the fixed grid
    root = ET.fromstring(render_svg(live, old, note="n"))
    cells = [
        r
        for r in root.iter("{http://www.w3.org/2000/svg}rect")
        if r.find("{http://www.w3.org/2000/svg}title") is not None
    ]
    xs = sorted({float(r.get("x", "0")) for r in cells})
    assert len(cells) == 10 * (18 + len(own) - 1)  # neither map trimmed to the other's columns
    ref_right = max(float(r.get("x", "0")) for r in cells[: 10 * 18])
    assert ref_right < min(float(r.get("x", "0")) for r in cells[10 * 18 :]) and len(xs) == 18 + len(own) - 1
