"""The Gamma Map: binning, merging, JSON round trip, the SVG renderer."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from monitor.errors import DataError
from monitor.gammamap import (
    GAMMA_BIN_LABELS,
    GAMMA_EDGES,
    P_BIN_LABELS,
    P_EDGES,
    GammaMap,
    bin_indices,
    empty_map,
    gamma_map,
    readable,
    render_svg,
)
from monitor.gammamap_window import GammaMapWindow


def test_edges_are_fixed_and_documented() -> None:
    assert len(P_EDGES) == 11 and P_EDGES[0] == 0.0 and P_EDGES[-1] == 1.0
    assert len(GAMMA_EDGES) == 19 and GAMMA_EDGES[0] == 0.0 and math.isinf(GAMMA_EDGES[-1])
    assert GAMMA_EDGES[1] == pytest.approx(1e-7) and GAMMA_EDGES[-2] == pytest.approx(10.0)
    assert all(a < b for a, b in zip(GAMMA_EDGES, GAMMA_EDGES[1:], strict=False))
    assert len(P_BIN_LABELS) == 10 and len(GAMMA_BIN_LABELS) == 18
    assert len(set(P_BIN_LABELS)) == 10 and len(set(GAMMA_BIN_LABELS)) == 18
    assert P_BIN_LABELS[0] == "0-0.1" and GAMMA_BIN_LABELS[-1] == ">=10"
    # Prometheus returns series sorted by label value; Grafana stacks heatmap rows in that order
    assert sorted(GAMMA_BIN_LABELS) == list(GAMMA_BIN_LABELS) and sorted(P_BIN_LABELS) == list(P_BIN_LABELS)


def test_counts_land_in_the_right_cells() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, 500)
    g = 10 ** rng.uniform(-6, 2, 500)
    m = gamma_map(p, g)
    assert m.total == 500 and m.skipped == 0
    assert len(m.counts) == 10 and all(len(r) == 18 for r in m.counts)
    expected = np.histogram2d(p, g, bins=[np.array(P_EDGES), np.array(GAMMA_EDGES[:-1] + (1e300,))])[0]
    assert np.array_equal(np.array(m.counts), expected.astype(int))
    assert m.unstable is None and m.probed is None


def test_boundaries() -> None:
    pi, gi = bin_indices(np.array([0.0, 0.1, 0.999, 1.0]), np.array([0.0, 1e-7, 9.99, 10.0]))
    assert pi.tolist() == [0, 1, 9, 9]
    assert gi.tolist() == [0, 1, 16, 17]


def test_non_finite_is_skipped_and_bad_values_raise() -> None:
    m = gamma_map(np.array([0.5, np.nan, 0.7]), np.array([0.1, 0.1, np.inf]))
    assert m.total == 1 and m.skipped == 2
    with pytest.raises(DataError, match=r"probability in \[0, 1\]; got 3.0"):
        gamma_map(np.array([3.0]), np.array([0.1]))
    with pytest.raises(DataError, match="γ must be ≥ 0"):
        gamma_map(np.array([0.5]), np.array([-0.1]))
    with pytest.raises(DataError, match="one P per γ; got 2 P values and 1"):
        gamma_map(np.array([0.5, 0.6]), np.array([0.1]))
    with pytest.raises(DataError, match="one unstable/probed flag per event"):
        gamma_map(np.array([0.5]), np.array([0.1]), np.array([True, False]))


def test_unstable_share_only_where_probed() -> None:
    p = np.array([0.95, 0.95, 0.95, 0.35, 0.35])
    g = np.array([0.002, 0.002, 0.002, 0.5, 0.5])
    uns = np.array([False, True, True, True, True])
    probed = np.array([True, True, False, True, False])
    m = gamma_map(p, g, uns, probed=probed)
    assert m.unstable is not None and m.probed is not None
    assert m.unstable[9][9] == 0.5  # two probed, one unstable (the unprobed True is ignored)
    assert m.unstable[3][14] == 1.0
    assert m.unstable[0][0] is None  # nothing probed there
    assert m.probed[9][9] == 2 and m.probed[3][14] == 1


def test_probed_none_gives_no_shares() -> None:
    m = gamma_map(np.array([0.5]), np.array([0.1]), probed=np.array([False]))
    assert m.unstable is None and m.probed == [[0] * 18 for _ in range(10)]


def test_merge_adds_counts_and_recomputes_shares() -> None:
    a = gamma_map(np.array([0.95, 0.95]), np.array([0.002, 0.002]), np.array([True, False]))
    b = gamma_map(np.array([0.95, 0.15]), np.array([0.002, 2.0]))
    m = a.merged(b)
    assert m.counts[9][9] == 3 and m.counts[1][15] == 1 and m.total == 4
    assert m.unstable is not None and m.unstable[9][9] == 0.5  # b was not probed: the share keeps a's denominator
    assert b.merged(b).unstable is None
    assert empty_map().merged(a).counts == a.counts


def test_merge_refuses_other_edges() -> None:
    a = gamma_map(np.array([0.5]), np.array([0.1]))
    other = GammaMap((0.0, 1.0), (0.0, math.inf), [[1]])
    with pytest.raises(DataError, match="different edges"):
        a.merged(other)


def test_shape_is_checked() -> None:
    with pytest.raises(DataError, match="must have 10 rows of 18 cells"):
        GammaMap(P_EDGES, GAMMA_EDGES, [[0] * 18] * 9)
    with pytest.raises(DataError, match="at least 2 edges"):
        GammaMap((0.0,), GAMMA_EDGES, [])


def test_json_round_trip_is_strict_json() -> None:
    m = gamma_map(np.array([0.95, 0.3]), np.array([0.002, 20.0]), np.array([True, False]))
    data = m.to_json()
    text = json.dumps(data, allow_nan=False)  # no Infinity in the output
    assert data["gamma_edges"][-1] == "+Inf" and data["total"] == 2
    assert data["gamma_bins"] == list(GAMMA_BIN_LABELS) and data["p_bins"] == list(P_BIN_LABELS)
    back = GammaMap.from_json(json.loads(text))
    assert back == m
    with pytest.raises(DataError, match="not a Gamma Map"):
        GammaMap.from_json({"counts": []})
    with pytest.raises(DataError, match="number or '\\+Inf'"):
        GammaMap.from_json({**data, "p_edges": ["x"] * 11})


def test_svg_is_well_formed_and_shows_both_panels() -> None:
    live = gamma_map(np.array([0.95, 0.3, 0.3]), np.array([0.002, 2.0, 2.0]), np.array([False, True, True]))
    ref = gamma_map(np.array([0.95, 0.96]), np.array([0.002, 0.001]))
    svg = render_svg(live, ref, title="iris / segment <all>")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    rects = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    view, _ = readable(live, ref)  # drawn on the reference's own γ columns
    assert len(rects) == 2 * 10 * (len(view.gamma_edges) - 1) < 2 * 10 * 18
    texts = " ".join(t.text or "" for t in root.iter(f"{ns}text"))
    assert "reference (n=2)" in texts and "live (n=3)" in texts and "iris / segment <all>" in texts
    assert len(list(root.iter(f"{ns}circle"))) == 2  # one cell with unstable events, and the legend's ring
    tips = [r.find(f"{ns}title").text or "" for r in rects]  # type: ignore[union-attr]
    assert any("2 events (66.7%), 100% of probed unstable" in t for t in tips)
    # darker fill where more of the map's mass sits
    fills = {t: r.get("fill") for t, r in zip(tips, rects, strict=True)}
    assert len(set(fills.values())) > 2


def test_svg_text_is_at_least_11_px_and_has_a_legend() -> None:
    root = ET.fromstring(render_svg(gamma_map(np.array([0.9]), np.array([0.01])), title="t"))
    ns = "{http://www.w3.org/2000/svg}"
    sizes = [float(t.get("font-size") or root.get("font-size") or 0) for t in root.iter(f"{ns}text")]
    assert min(sizes) >= 11
    texts = " ".join(t.text or "" for t in root.iter(f"{ns}text"))
    assert "cell events / fullest cell:" in texts and "100%" in texts and "ring: share of probed" in texts


def test_the_drawn_view_merges_cells_exactly_on_the_models_own_columns() -> None:
    rng = np.random.default_rng(4)
    p_ref, g_ref = rng.uniform(0.5, 1.0, 500), 10 ** rng.uniform(-4, -3, 500)
    ref = gamma_map(p_ref, g_ref)
    live = gamma_map(np.r_[p_ref[:100], [0.6]], np.r_[g_ref[:100], [5.0]], np.r_[np.zeros(100, bool), [True]])
    view, ref_view = readable(live, ref, classes=2)
    assert ref_view is not None
    assert view.total == live.total and ref_view.total == ref.total  # nothing lost
    assert view.p_edges[0] == 0.5 and len(view.p_edges) == 6  # P from 1/K: 5 rows, not 10
    cols = len(view.gamma_edges) - 1
    assert 3 <= cols <= 5 and view.gamma_edges[0] == 0.0 and math.isinf(view.gamma_edges[-1])
    assert view.counts[1][-1] == 1  # the live event far above the reference's range: in the last, open column
    assert view.unstable is not None and view.unstable[1][-1] == 1.0 and view.probed is not None
    assert sum(map(sum, view.probed)) == sum(map(sum, live.probed or []))


def test_the_drawn_view_keeps_rows_below_one_over_k_that_hold_events() -> None:
    live = gamma_map(np.array([0.2, 0.9]), np.array([0.01, 0.01]))  # P 0.2 with K = 3: not an argmax probability
    view, _ = readable(live, classes=3)
    assert view.p_edges[0] == 0.0 and view.total == 2  # merged into the first row, which then starts at 0
    clean, _ = readable(gamma_map(np.array([0.5, 0.9]), np.array([0.01, 0.01])), classes=3)
    assert clean.p_edges[0] == pytest.approx(1 / 3) and clean.p_edges[1] == 0.4


def test_the_drawn_view_of_maps_on_other_edges_or_empty_is_unchanged() -> None:
    empty = empty_map()
    assert readable(empty)[0].gamma_edges == empty.gamma_edges
    other = GammaMap((0.0, 1.0), (0.0, 1.0, math.inf), [[1, 0]])
    live = gamma_map(np.array([0.9]), np.array([0.01]))
    assert readable(live, other) == (live, other)


def test_svg_of_an_empty_map() -> None:
    root = ET.fromstring(render_svg(empty_map()))
    assert root.tag.endswith("svg")


def test_svg_panel_labels() -> None:
    svg = render_svg(empty_map(), empty_map(), labels=("today", "last week"))
    assert "today (n=0)" in svg and "last week (n=0)" in svg


def test_window_keeps_the_last_events_and_the_total() -> None:
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, 700)
    g = 10 ** rng.uniform(-5, 1.5, 700)
    w = GammaMapWindow(capacity=250)
    for lo in range(0, 700, 37):  # batches smaller than the window
        w.update(p[lo : lo + 37], g[lo : lo + 37])
    assert w.window() == gamma_map(p[-250:], g[-250:])
    assert w.cumulative() == gamma_map(p, g)
    w.update(p[:300], g[:300])  # one batch larger than the window
    assert w.window() == gamma_map(p[50:300], g[50:300])
    assert int(w.last_added.sum()) == 300
    w.reset()
    assert w.cumulative().total == 0


def test_window_skips_non_finite_and_refuses_bad_input() -> None:
    w = GammaMapWindow(capacity=4).update(np.array([0.5, np.nan]), np.array([0.1, 0.1]))
    assert w.window().total == 1 and w.window().skipped == 1
    with pytest.raises(DataError, match="P in \\[0, 1\\]"):
        w.update(np.array([1.5]), np.array([0.1]))
    with pytest.raises(DataError, match="one P per γ"):
        w.update(np.array([0.5]), np.array([0.1, 0.2]))
    with pytest.raises(DataError, match="capacity ≥ 1"):
        GammaMapWindow(capacity=0)
