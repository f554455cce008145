"""Rolling windows: time expiry from event timestamps, bounded memory, histogram quantiles, folding."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.errors import ConfigError, DataError
from monitor.rolling.sketch import BinGrid
from monitor.rolling.windows import CountWindow, Signal, SignalBatch, TimeWindow, WindowSet


def batch(n: int, ts: float, *, seed: int = 0, n_features: int = 3, segment: str = "eu") -> SignalBatch:
    rng = np.random.default_rng(seed)
    return SignalBatch.of(
        features=rng.normal(size=(n, n_features)),
        timestamps_seconds=ts,
        gamma=rng.exponential(0.01, size=n),
        flicker=rng.integers(0, 33, size=n) / 32,
        p_adj=rng.random(n),
        shadow_disagreement=(rng.random(n) < 0.1).astype(float),
        predicted_class=rng.integers(0, 3, size=n),
        segment=segment,
    )


def test_time_window_expires_buckets_by_event_time() -> None:
    w = TimeWindow(60.0, n_features=1, buckets=60)
    w.update(SignalBatch.of(features=[[1.0]], timestamps_seconds=1000.0, gamma=[0.5]))
    w.update(SignalBatch.of(features=[[3.0]], timestamps_seconds=1030.0, gamma=[0.1]))
    assert w.snapshot(now_seconds=1030.0).events == 2
    assert w.snapshot(now_seconds=1059.5).events == 2
    later = w.snapshot(now_seconds=1060.0)
    assert later.events == 1 and later.signals["gamma"].mean == pytest.approx(0.1)
    assert w.snapshot(now_seconds=1090.0).events == 0


def test_time_window_reuses_a_slot_after_wraparound() -> None:
    w = TimeWindow(10.0, n_features=1, buckets=10)
    w.update(SignalBatch.of(features=[[0.0]] * 5, timestamps_seconds=0.5, gamma=np.ones(5)))
    w.update(SignalBatch.of(features=[[0.0]] * 2, timestamps_seconds=10.5, gamma=np.zeros(2)))  # same slot
    snap = w.snapshot(now_seconds=10.5)
    assert snap.events == 2 and snap.signals["gamma"].mean == 0.0


def test_time_window_drops_events_older_than_the_window() -> None:
    w = TimeWindow(60.0, n_features=1)
    w.update(SignalBatch.of(features=[[0.0]], timestamps_seconds=500.0))
    w.update(SignalBatch.of(features=[[0.0], [0.0]], timestamps_seconds=[100.0, 499.0]))
    assert w.late_events == 1
    assert w.snapshot(now_seconds=500.0).events == 2


def test_time_window_splits_a_batch_by_per_event_timestamps() -> None:
    w = TimeWindow(60.0, n_features=1, buckets=6)
    w.update(SignalBatch.of(features=[[0.0]] * 3, timestamps_seconds=[0.0, 30.0, 59.0], gamma=[1.0, 2.0, 3.0]))
    snap = w.snapshot(now_seconds=65.0)  # the 0-10 s bucket expired
    assert snap.events == 2 and snap.signals["gamma"].mean == pytest.approx(2.5)


def test_time_window_means_and_feature_stats_match_numpy() -> None:
    b = batch(5000, 100.0, seed=3)
    snap = TimeWindow(60.0, n_features=3).update(b).snapshot(now_seconds=100.0)
    for name in ("gamma", "flicker", "p_adj", "shadow_disagreement"):
        s = snap.signals[name]
        assert s.count == 5000
        assert s.mean == pytest.approx(float(b.signal(name).mean()))
        assert s.std == pytest.approx(float(b.signal(name).std()), rel=1e-6)
    np.testing.assert_allclose(snap.feature_mean, b.features.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(snap.feature_std, b.features.std(axis=0), rtol=1e-9)
    mix = np.bincount(b.predicted_class) / 5000
    assert snap.class_mix == pytest.approx({0: mix[0], 1: mix[1], 2: mix[2]})


def test_time_window_skips_missing_signals() -> None:
    b = SignalBatch.of(features=np.zeros((4, 1)), timestamps_seconds=0.0, shadow_disagreement=[1, np.nan, 0, np.nan])
    snap = TimeWindow(60.0, n_features=1).update(b).snapshot(now_seconds=0.0)
    assert snap.events == 4
    assert snap.signals["shadow_disagreement"].count == 2 and snap.signals["shadow_disagreement"].mean == 0.5
    assert snap.signals["gamma"].count == 0 and np.isnan(snap.signals["gamma"].mean)


def test_time_window_folds_classes_beyond_max_classes() -> None:
    b = SignalBatch.of(features=np.zeros((4, 1)), timestamps_seconds=0.0, predicted_class=[0, 1, 7, -1])
    snap = TimeWindow(60.0, n_features=1, max_classes=2).update(b).snapshot(now_seconds=0.0)
    assert snap.class_mix == pytest.approx({-1: 1 / 3, 0: 1 / 3, 1: 1 / 3})


@pytest.mark.parametrize("dist", ["exponential", "lognormal_with_zeros"])
def test_histogram_quantiles_match_numpy_within_one_bin(dist: str) -> None:
    rng = np.random.default_rng(7)
    g = rng.exponential(0.02, 20000) if dist == "exponential" else rng.lognormal(np.log(1e-3), 2.0, 20000)
    if dist != "exponential":
        g[rng.random(g.size) < 0.4] = 0.0
    qs = (0.1, 0.5, 0.9, 0.99)
    grid = BinGrid.log_spaced()
    snap = TimeWindow(60.0, n_features=1, quantiles=qs).update(
        SignalBatch.of(features=np.zeros((g.size, 1)), timestamps_seconds=0.0, gamma=g)
    )
    got = snap.snapshot(now_seconds=0.0).signals["gamma"].quantiles
    for q in qs:
        true = float(np.quantile(g, q))
        if true == 0.0:
            assert got[q] == 0.0
        else:
            assert abs(np.log(got[q] / true)) <= np.log(grid.resolution) + 1e-9, (q, got[q], true)


def test_unit_grid_quantiles_match_numpy_within_one_bin() -> None:
    rng = np.random.default_rng(8)
    f = rng.integers(0, 33, 10000) / 32
    f[rng.random(f.size) < 0.7] = 0.0
    grid = BinGrid.unit()
    got = grid.quantiles(grid.counts(f), [0.5, 0.75, 0.9, 0.99])
    want = np.quantile(f, [0.5, 0.75, 0.9, 0.99])
    assert got[0] == 0.0
    np.testing.assert_allclose(got, want, atol=grid.resolution)


@pytest.mark.parametrize("seed", range(6))
def test_time_window_matches_a_per_event_reference_over_spans_wraps_and_late_events(seed: int) -> None:
    """Batches spanning many buckets (wrapping the ring, some events late, signals missing, classes past the cap)
    give the snapshot a per-event reference computes from the events the window still holds."""
    rng = np.random.default_rng(seed)
    buckets, span, max_classes = 6, 60.0, 2
    w = TimeWindow(span, n_features=2, buckets=buckets, max_classes=max_classes)
    width = span / buckets
    kept: list[tuple[int, float, float, int, list[float]]] = []  # bucket, gamma, flicker, class, features
    newest = None
    t = 1000.0
    for _ in range(12):
        n = int(rng.integers(1, 9))
        ts = t + rng.uniform(-70.0, 40.0, size=n)  # some older than the window, some buckets ahead
        t += rng.uniform(0.0, 25.0)
        gamma = np.where(rng.random(n) < 0.3, np.nan, rng.exponential(0.1, size=n))
        flicker = np.where(rng.random(n) < 0.2, np.nan, rng.random(n))
        pc = rng.integers(-1, 4, size=n)
        x = rng.normal(size=(n, 2))
        w.update(SignalBatch.of(features=x, timestamps_seconds=ts, gamma=gamma, flicker=flicker, predicted_class=pc))
        bid = np.floor(ts / width).astype(int)
        newest = int(bid.max()) if newest is None else max(newest, int(bid.max()))
        kept = [e for e in kept if e[0] > newest - buckets]  # buckets cleared as time moves on
        kept += [
            (int(b), float(g), float(f), int(c), row.tolist())
            for b, g, f, c, row in zip(bid, gamma, flicker, pc, x, strict=True)
            if b > newest - buckets
        ]
    assert newest is not None
    now = (newest + 0.5) * width
    snap = w.snapshot(now_seconds=now)
    live = [e for e in kept if e[0] > int(np.floor(now / width)) - buckets]
    assert snap.events == len(live)
    signals: tuple[tuple[Signal, int], ...] = (("gamma", 1), ("flicker", 2))
    for name, col in signals:
        values = np.array([e[col] for e in live])
        values = values[np.isfinite(values)]
        summary = snap.signals[name]
        assert summary.count == values.size
        assert summary.mean == pytest.approx(values.mean(), rel=1e-9)
        assert summary.std == pytest.approx(values.std(), rel=1e-6, abs=1e-12)
        expected = w.grids[name].quantiles(w.grids[name].counts(values), w.quantile_levels)
        np.testing.assert_allclose(list(summary.quantiles.values()), expected, rtol=1e-12)
    classes = np.array([e[3] for e in live])
    classes = classes[classes >= 0]
    folded = np.where(classes >= max_classes, -1, classes)
    expected_mix = {int(c): float(np.mean(folded == c)) for c in np.unique(folded)}
    assert snap.class_mix == pytest.approx(expected_mix)
    x = np.array([e[4] for e in live])
    np.testing.assert_allclose(snap.feature_mean, x.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(snap.feature_std, x.std(axis=0), rtol=1e-6)


def test_count_window_keeps_the_last_n_events_in_order() -> None:
    w = CountWindow(5, n_features=1)
    for start in range(0, 12, 3):
        v = np.arange(start, start + 3, dtype=float)
        w.update(SignalBatch.of(features=v[:, None], timestamps_seconds=0.0, gamma=v, predicted_class=[0, 1, 1]))
    assert w.values("gamma").tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert w.features()[:, 0].tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]
    snap = w.snapshot()
    assert snap.events == 5 and snap.signals["gamma"].quantiles[0.5] == 9.0
    assert snap.class_mix == pytest.approx({0: 0.2, 1: 0.8})  # classes of events 7..11: 1, 1, 0, 1, 1


def test_count_window_takes_the_tail_of_an_oversized_batch() -> None:
    w = CountWindow(4, n_features=0)
    w.update(SignalBatch.of(features=np.zeros((10, 0)), timestamps_seconds=0.0, flicker=np.arange(10.0)))
    assert w.values("flicker").tolist() == [6.0, 7.0, 8.0, 9.0]


def test_window_set_memory_is_bounded_under_a_million_events() -> None:
    ws = WindowSet(count_size=2000)
    b = batch(10_000, 0.0, seed=1)
    ws.update("m", b)
    size_after_first = ws.nbytes
    for i in range(1, 100):  # 1e6 events over ~28 hours of event time
        ws.update(
            "m",
            SignalBatch.of(
                features=b.features,
                timestamps_seconds=i * 1000.0,
                gamma=b.gamma,
                flicker=b.flicker,
                predicted_class=b.predicted_class,
                segment="eu",
            ),
        )
    assert ws.nbytes == size_after_first
    assert size_after_first < 2_000_000
    snap = ws.snapshot("m", "eu", now_seconds=99_000.0)
    assert snap["3600s"].events == 40_000 and snap["last_2000"].events == 2000


def test_window_set_folds_segments_beyond_the_cap() -> None:
    ws = WindowSet(window_seconds=(60.0,), count_size=10, max_segments=2)
    for seg in ["a", "b", "c", "d", "a"]:
        ws.update("m", batch(3, 0.0, segment=seg))
    assert sorted(ws.keys) == [("m", "a"), ("m", "b"), ("m", "other")]
    assert ws.folded_events == 6
    assert ws.snapshot("m", "other", now_seconds=0.0)["60s"].events == 6


def test_window_set_folds_models_beyond_the_cap() -> None:
    ws = WindowSet(window_seconds=(60.0,), count_size=10, max_models=1)
    ws.update("a", batch(2, 0.0)).update("b", batch(2, 0.0))
    assert sorted(ws.keys) == [("a", "eu"), ("other", "eu")] and ws.folded_events == 2


def test_window_set_groups_per_event_segments() -> None:
    ws = WindowSet(window_seconds=(60.0,), count_size=10)
    b = SignalBatch.of(
        features=np.zeros((3, 1)), timestamps_seconds=5.0, gamma=[1.0, 2.0, 3.0], segment=["x", "y", "x"]
    )
    ws.update("m", b)
    assert ws.count_window("m", "x").values("gamma").tolist() == [1.0, 3.0]
    assert ws.snapshot("m", "y", now_seconds=5.0)["60s"].signals["gamma"].mean == 2.0


def test_window_set_reset_forgets_everything() -> None:
    ws = WindowSet().update("m", batch(5, 0.0))
    ws.reset()
    assert ws.keys == () and ws.nbytes == 0 and ws.folded_events == 0


def test_window_set_unknown_key_raises_with_the_known_keys() -> None:
    ws = WindowSet().update("m", batch(1, 0.0))
    with pytest.raises(DataError, match=r"no windows for model 'x', segment 'eu'; known keys: \[\('m', 'eu'\)\]"):
        ws.snapshot("x", "eu", now_seconds=0.0)


def test_window_set_rejects_a_changed_feature_count() -> None:
    ws = WindowSet().update("m", batch(2, 0.0, n_features=3))
    with pytest.raises(DataError, match="built for 3 features; the batch has 4"):
        ws.update("m", batch(2, 0.0, n_features=4))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window_seconds": ()}, "window_seconds must be one or more"),
        ({"window_seconds": (60.0, -1.0)}, "window_seconds must be one or more"),
        ({"window_seconds": (60.0, 60.0)}, "repeated span"),
        ({"buckets": 1}, "buckets >= 2"),
        ({"count_size": 1}, "size >= 2"),
        ({"max_segments": 0}, "max_models and max_segments must be >= 1"),
        ({"max_classes": 0}, "max_classes must be >= 1"),
        ({"quantiles": (0.5, 1.5)}, r"quantiles must lie in \[0, 1\]"),
    ],
)
def test_window_set_rejects_bad_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        WindowSet(**kwargs)  # type: ignore[arg-type]


def test_signal_batch_rejects_mismatched_lengths() -> None:
    with pytest.raises(DataError, match="signal 'gamma' has 2 values but the batch has 3 events"):
        SignalBatch.of(features=np.zeros((3, 1)), timestamps_seconds=0.0, gamma=[0.0, 1.0])
    with pytest.raises(DataError, match="NaN or infinite"):
        SignalBatch.of(features=np.zeros((1, 1)), timestamps_seconds=float("nan"))


def test_bin_grid_rejects_bad_edges() -> None:
    with pytest.raises(ConfigError, match="strictly increasing"):
        BinGrid(np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ConfigError, match="0 < low < high"):
        BinGrid.log_spaced(1.0, 0.1)
