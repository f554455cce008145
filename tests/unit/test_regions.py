"""Probes: the bounded index of flagged regions (monitor/probes/regions.py), on plain arrays."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.errors import ConfigError
from monitor.probes.regions import RegionIndex


def feed(
    index: RegionIndex,
    z: np.ndarray,
    *,
    gamma: float | np.ndarray = 0.1,
    flicker: float | np.ndarray = 0.0,
    flagged: np.ndarray | None = None,
    now: float = 0.0,
) -> RegionIndex:
    """Standardized rows ``z`` double as raw rows ×10 (so exemplars are told apart from centres)."""
    n = z.shape[0]
    return index.update(
        z,
        z * 10.0,
        np.broadcast_to(np.asarray(gamma, dtype=float), (n,)).copy(),
        np.broadcast_to(np.asarray(flicker, dtype=float), (n,)).copy(),
        np.ones(n, dtype=bool) if flagged is None else flagged,
        now,
    )


def test_regions_flagged_rows_open_and_join_within_radius() -> None:
    index = RegionIndex(2, radius=1.0)
    feed(index, np.array([[0.0, 0.0], [0.5, 0.0], [5.0, 5.0], [5.2, 4.9]]))
    assert len(index) == 2
    near, far = index.regions
    assert (near.events, far.events) == (2, 2)
    np.testing.assert_allclose(near.centre, [0.25, 0.0])  # the running mean of its members
    np.testing.assert_allclose(far.centre, [5.1, 4.95])
    assert near.radius == far.radius == 1.0
    assert index.flagged_total == 4


def test_regions_unflagged_rows_are_ignored() -> None:
    index = RegionIndex(2)
    feed(index, np.zeros((3, 2)), flagged=np.array([False, False, False]))
    assert len(index) == 0 and index.flagged_total == 0
    feed(index, np.zeros((3, 2)), flagged=np.array([False, True, False]))
    assert len(index) == 1 and index.regions[0].events == 1


def test_regions_default_radius_is_half_a_standard_deviation_per_axis() -> None:
    assert RegionIndex(16).radius == pytest.approx(2.0)
    index = RegionIndex(4)  # radius 1
    feed(index, np.array([[0.0, 0, 0, 0], [0.9, 0, 0, 0], [2.5, 0, 0, 0]]))
    assert [r.events for r in index.regions] == [2, 1]


def test_regions_scores_and_means_accumulate() -> None:
    index = RegionIndex(2, radius=1.0)
    feed(index, np.zeros((4, 2)), gamma=np.array([0.1, 0.3, np.nan, 0.2]), flicker=np.array([0.0, 0.5, 0.25, 0.25]))
    (r,) = index.regions
    assert r.events == 4
    assert r.gamma_mean == pytest.approx(0.6 / 4)  # NaN γ counts as 0
    assert r.gamma_max == pytest.approx(0.3)
    assert r.flicker_mean == pytest.approx(0.25)
    assert r.score == pytest.approx(0.6 + 1.0)
    d = r.to_dict()
    assert d["id"] == r.region_id and d["events"] == 4 and d["exemplars"] == 4
    assert d["centre_standardized"] == [0.0, 0.0]


def test_regions_index_is_bounded_and_evicts_the_lowest_score() -> None:
    index = RegionIndex(1, max_regions=3, radius=0.5)
    feed(index, np.array([[0.0]]), gamma=1.0)
    feed(index, np.array([[10.0]]), gamma=0.1)  # the weakest
    feed(index, np.array([[20.0]]), gamma=2.0)
    feed(index, np.array([[30.0]]), gamma=0.5)  # full: evicts the region at 10
    assert len(index) == 3 and index.evicted_total == 1
    assert sorted(float(r.centre[0]) for r in index.regions) == [0.0, 20.0, 30.0]
    assert [float(r.centre[0]) for r in index.worst(2)] == [20.0, 0.0]
    for k in range(10):
        feed(index, np.array([[100.0 + 10 * k]]), gamma=0.01 * (k + 1))
    assert len(index) == 3


def test_regions_exemplars_are_a_bounded_ring_of_raw_rows() -> None:
    index = RegionIndex(2, radius=1.0, max_exemplars=4)
    z = np.column_stack([np.linspace(0.0, 0.6, 10), np.zeros(10)])
    feed(index, z)
    (r,) = index.regions
    assert r.events == 10 and r.exemplars.shape == (4, 2)
    points = r.points()
    assert points.shape == (4, 2)
    # the newest four raw rows (×10), in ring order: slots hold rows 8, 9, 6, 7
    np.testing.assert_allclose(sorted(points[:, 0]), sorted(z[6:, 0] * 10.0))
    small = RegionIndex(2, max_exemplars=4)
    feed(small, np.zeros((2, 2)))
    assert small.regions[0].points().shape == (2, 2)


def test_regions_scores_decay_with_the_half_life() -> None:
    index = RegionIndex(1, radius=0.5, half_life_seconds=10.0)
    feed(index, np.array([[0.0]]), gamma=1.0, now=0.0)
    feed(index, np.array([[5.0]]), gamma=1.0, now=10.0)  # the first region decays to 0.5 before this update
    old, new = index.regions
    assert old.score == pytest.approx(0.5) and new.score == pytest.approx(1.0)
    feed(index, np.array([[5.0]]), gamma=0.0, now=30.0)  # two more half-lives
    assert old.score == pytest.approx(0.125) and new.score == pytest.approx(0.25)
    assert (old.last_seen, new.last_seen, new.first_seen) == (0.0, 30.0, 10.0)
    feed(index, np.array([[5.0]]), gamma=0.0, now=20.0)  # a clock that steps back does not grow scores
    assert old.score == pytest.approx(0.125)


def test_regions_reset_forgets_everything() -> None:
    index = RegionIndex(2, max_regions=1, radius=0.5)
    feed(index, np.array([[0.0, 0.0], [3.0, 3.0]]))
    assert index.evicted_total == 1
    index.reset()
    assert len(index) == 0 and len(index.regions) == 0
    assert (index.flagged_total, index.evicted_total) == (0, 0)
    fresh = feed(index, np.array([[1.0, 1.0]])).worst(1)
    assert [r.region_id for r in fresh] == ["r0"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_features": 0}, "must be >= 1"),
        ({"n_features": 2, "max_regions": 0}, "must be >= 1"),
        ({"n_features": 2, "max_exemplars": 0}, "must be >= 1"),
        ({"n_features": 2, "radius": 0.0}, "radius must be > 0"),
        ({"n_features": 2, "half_life_seconds": -1.0}, "half_life_seconds must be > 0"),
    ],
)
def test_regions_bad_parameters_raise(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RegionIndex(**kwargs)  # type: ignore[arg-type]


def test_regions_are_formed_within_a_segment_never_mixing_segments() -> None:
    idx = RegionIndex(2, max_regions=8, radius=10.0, max_exemplars=3)
    x = np.arange(12, dtype=np.float64).reshape(6, 2) * 0.01  # all within one radius of each other
    g = np.full(6, 0.5)
    idx.update(x, x, g, np.zeros(6), np.ones(6, bool), 0.0, segments=["a", "b", "a", "c", "a", "b"])
    by_segment = {r.segment: r for r in idx.regions}
    assert sorted(str(k) for k in by_segment) == ["a", "b", "c"] and len(idx) == 3
    for segment, region in by_segment.items():
        assert set(region.segments()) == {segment}  # every exemplar of a region is of its segment
        assert region.to_dict()["segment"] == segment
    a = by_segment["a"]
    assert a.events == 3 and np.array_equal(a.points(), x[[0, 2, 4]])
    np.testing.assert_allclose(a.centre, x[[0, 2, 4]].mean(axis=0))
    idx.update(x[:1], x[:1], g[:1], np.zeros(1), np.ones(1, bool), 1.0)  # no segments given: a region of its own
    assert len(idx) == 4 and idx.regions[-1].segment is None and idx.regions[-1].segments() == [None]
    with pytest.raises(ValueError, match="one segment per row: 1 for 6 rows"):
        idx.update(x, x, g, np.zeros(6), np.ones(6, bool), 2.0, segments=["a"])


def test_regions_rank_by_their_segments_severity_then_score() -> None:
    idx = RegionIndex(1, max_regions=8, radius=0.5)
    z = np.array([[0.0], [10.0], [20.0]])
    idx.update(z, z, np.array([5.0, 0.1, 1.0]), np.zeros(3), np.ones(3, bool), 0.0, segments=["calm", "moved", "calm"])
    assert [r.segment for r in idx.worst(3)] == ["calm", "calm", "moved"]  # no severity yet: by score alone
    idx.severity = {"moved": (2.0, 1.0, 0.3), "calm": (0.0, 0.0, 0.0)}
    assert [(r.segment, r.score) for r in idx.worst(3)] == [("moved", 0.1), ("calm", 5.0), ("calm", 1.0)]
    idx.severity = {"moved": (1.0, 2.0, 0.3), "other": (1.0, 3.0, 0.1), "calm": (0.0, 0.0, 0.0)}
    assert idx.rank(idx.worst(1)[0]) == ((1.0, 2.0, 0.3), 0.1)
    assert idx.severity_of("other") > idx.severity_of("moved") > idx.severity_of("calm") > idx.severity_of("unknown")


def test_regions_a_full_index_evicts_by_rank_and_keeps_the_segment_that_moved() -> None:
    idx = RegionIndex(1, max_regions=2, radius=0.5)
    idx.severity = {"moved": (2.0, 1.0, 0.3), "calm": (0.0, 0.0, 0.0)}
    flags = np.ones(1, bool)
    idx.update(np.array([[0.0]]), np.array([[0.0]]), np.array([0.1]), np.zeros(1), flags, 0.0, segments=["moved"])
    idx.update(np.array([[5.0]]), np.array([[5.0]]), np.array([9.0]), np.zeros(1), flags, 0.0, segments=["calm"])
    # full: a calm event far away replaces the calm region (the lowest rank), never the moved one
    idx.update(np.array([[9.0]]), np.array([[9.0]]), np.array([0.5]), np.zeros(1), flags, 0.0, segments=["calm"])
    assert sorted((str(r.segment), float(r.centre[0])) for r in idx.regions) == [("calm", 9.0), ("moved", 0.0)]
    assert (idx.evicted_total, idx.refused_total) == (1, 0)
    # full of regions that outrank its segment: a new event of another stable segment is not kept
    idx.severity = {"moved": (2.0, 1.0, 0.3), "calm": (1.0, 1.0, 0.1), "quiet": (0.0, 0.0, 0.0)}
    idx.update(np.array([[30.0]]), np.array([[30.0]]), np.array([9.0]), np.zeros(1), flags, 0.0, segments=["quiet"])
    assert sorted(str(r.segment) for r in idx.regions) == ["calm", "moved"]
    assert (idx.evicted_total, idx.refused_total, idx.flagged_total) == (1, 1, 4)
    # a new region of the segment that moved takes the lowest-ranked slot, though its score is lower
    idx.update(np.array([[40.0]]), np.array([[40.0]]), np.array([0.01]), np.zeros(1), flags, 0.0, segments=["moved"])
    assert [r.segment for r in idx.regions] == ["moved", "moved"]
    assert idx.evicted_total == 2
