"""Ball constructions: simplex moments, antipodal symmetry, seeded rotations, hypercube pairs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from monitor.errors import ConfigError
from monitor.signals.balls import (
    SIMPLEX_MAX_FEATURES,
    BallSpec,
    add_hypercube_offsets,
    ball_directions,
    default_hypercube_points,
    event_keys,
    haar_rotation,
    hypercube_axes,
    parse_ball,
    simplex_vertices,
)

DIMENSIONS = [1, 2, 3, 5, 10, 40]


@pytest.mark.parametrize("n", DIMENSIONS)
def test_simplex_vertices_sum_to_zero(n: int) -> None:
    np.testing.assert_allclose(simplex_vertices(n).sum(axis=0), 0.0, atol=1e-12)


@pytest.mark.parametrize("n", DIMENSIONS)
def test_simplex_vertices_have_unit_norm_and_pairwise_dot_minus_one_over_n(n: int) -> None:
    v = simplex_vertices(n)
    assert v.shape == (n + 1, n)
    expected = np.where(np.eye(n + 1) > 0, 1.0, -1.0 / n)
    np.testing.assert_allclose(v @ v.T, expected, atol=1e-12)


@pytest.mark.parametrize("n", DIMENSIONS)
def test_simplex_vertices_second_moment_is_isotropic(n: int) -> None:
    v = simplex_vertices(n)
    np.testing.assert_allclose(v.T @ v, (n + 1) / n * np.eye(n), atol=1e-12)


def test_simplex_vertices_rejects_zero_dimensions() -> None:
    with pytest.raises(ConfigError, match="a simplex needs n >= 1 features; got 0"):
        simplex_vertices(0)


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_simplex_anti_is_the_simplex_and_its_reflection(n: int) -> None:
    v = ball_directions("simplex+anti", n)
    assert v.shape == (2 * (n + 1), n)
    np.testing.assert_array_equal(v[: n + 1], simplex_vertices(n))
    np.testing.assert_array_equal(v[n + 1 :], -simplex_vertices(n))


@pytest.mark.parametrize(("n", "order"), [(n, k) for n in (2, 3, 5) for k in (1, 3, 5)])
def test_simplex_anti_odd_moments_vanish(n: int, order: int) -> None:
    v = ball_directions("simplex+anti", n)
    for axes in itertools.combinations_with_replacement(range(n), order):
        moment = np.prod(v[:, list(axes)], axis=1).sum()
        assert abs(moment) < 1e-12, axes


@pytest.mark.parametrize("n", [2, 3, 5])
def test_bare_simplex_third_moment_does_not_vanish(n: int) -> None:
    # the reason simplex+anti is the default: the triangle/tetrahedron alone has odd moments
    v = ball_directions("simplex", n)
    third = np.einsum("mi,mj,mk->ijk", v, v, v)
    assert np.abs(third).max() > 0.1


@pytest.mark.parametrize("ball", ["simplex", "simplex+anti", "rotations:3", "hypercube:4", "hypercube:64"])
def test_ball_directions_rows_have_unit_norm(ball: str) -> None:
    v = ball_directions(ball, 7, seed=3)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-12)


def test_rotations_have_k_copies_of_simplex_anti() -> None:
    v = ball_directions("rotations:4", 3, seed=0)
    assert v.shape == (4 * 2 * 4, 3)


def test_rotations_preserve_the_simplex_anti_moments() -> None:
    n = 4
    v = ball_directions("rotations:3", n, seed=11)
    for block in v.reshape(3, 2 * (n + 1), n):
        np.testing.assert_allclose(block.sum(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(block.T @ block, 2 * (n + 1) / n * np.eye(n), atol=1e-12)


def test_rotations_are_reproducible_for_a_seed() -> None:
    np.testing.assert_array_equal(
        ball_directions("rotations:5", 6, seed=42), ball_directions("rotations:5", 6, seed=42)
    )


def test_rotations_differ_across_seeds() -> None:
    a = ball_directions("rotations:5", 6, seed=1)
    b = ball_directions("rotations:5", 6, seed=2)
    assert np.abs(a - b).max() > 0.1


def test_haar_rotation_is_orthogonal() -> None:
    q = haar_rotation(5, np.random.default_rng(0))
    np.testing.assert_allclose(q @ q.T, np.eye(5), atol=1e-12)


@pytest.mark.parametrize(("m", "n"), [(2, 3), (8, 50), (128, 1000)])
def test_hypercube_directions_come_in_plus_minus_pairs(m: int, n: int) -> None:
    v = ball_directions(f"hypercube:{m}", n, seed=5)
    assert v.shape == (m, n)
    np.testing.assert_array_equal(v[: m // 2], -v[m // 2 :])


@pytest.mark.parametrize(("m", "n"), [(2, 3), (8, 50), (128, 1000)])
def test_hypercube_directions_are_distinct_one_hot_axes(m: int, n: int) -> None:
    half = ball_directions(f"hypercube:{m}", n, seed=5)[: m // 2]
    assert np.all(np.count_nonzero(half, axis=1) == 1)
    assert len(set(np.flatnonzero(half) % n)) == m // 2


def test_hypercube_uses_every_axis_when_m_covers_them() -> None:
    v = ball_directions("hypercube:10", 3, seed=0)
    np.testing.assert_array_equal(v, np.vstack([np.eye(3), -np.eye(3)]))


def test_hypercube_sample_is_reproducible_for_a_seed() -> None:
    np.testing.assert_array_equal(
        ball_directions("hypercube:16", 300, seed=9), ball_directions("hypercube:16", 300, seed=9)
    )


def test_hypercube_sample_differs_across_seeds() -> None:
    assert not np.array_equal(
        ball_directions("hypercube:16", 300, seed=1), ball_directions("hypercube:16", 300, seed=2)
    )


def test_auto_ball_is_simplex_anti_up_to_the_feature_limit() -> None:
    assert BallSpec("auto").resolve(SIMPLEX_MAX_FEATURES) == BallSpec("simplex+anti")
    assert ball_directions("auto", SIMPLEX_MAX_FEATURES).shape == (2 * (SIMPLEX_MAX_FEATURES + 1), SIMPLEX_MAX_FEATURES)


def test_auto_ball_switches_to_hypercube_above_the_feature_limit() -> None:
    n = SIMPLEX_MAX_FEATURES + 1
    assert SIMPLEX_MAX_FEATURES == 256
    assert BallSpec("auto").resolve(n) == BallSpec("hypercube", 16)
    assert ball_directions("auto", n).shape == (16, n)
    assert BallSpec("auto").resolve(10_000) == BallSpec("hypercube", 20)  # the seed's 0.1 % of 2n
    assert parse_ball("hypercube").resolve(10_000) == BallSpec("hypercube", 20)
    assert BallSpec("hypercube", 20).per_event(10_000) and not BallSpec("hypercube", 20).per_event(10)
    assert not BallSpec("hypercube", 20).per_event(SIMPLEX_MAX_FEATURES)  # one fixed sample at low dimension
    assert not BallSpec("simplex+anti").per_event(10_000)


def test_default_hypercube_points() -> None:
    assert [default_hypercube_points(n) for n in (1, 8, 257, 4096, 8000, 10_000, 100_000)] == [
        2,
        16,
        16,
        16,
        16,
        20,
        200,
    ]


def test_hypercube_directions_build_nothing_n_by_n() -> None:
    import tracemalloc

    tracemalloc.start()
    v = ball_directions("hypercube:16", 4096, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert v.shape == (16, 4096)
    assert peak < 4 * 16 * 4096 * 8  # a few copies of the (m, n) result, not 4096² (134 MB)


def test_event_keys_depend_on_the_values_and_the_seed_only() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 300)).astype(np.float32)
    keys = event_keys(x, seed=3)
    assert keys.dtype == np.uint64 and len(set(keys.tolist())) == 50
    assert np.array_equal(event_keys(x[::-1], seed=3), keys[::-1])  # position in the batch does not matter
    assert np.array_equal(event_keys(x.astype(np.float64), seed=3), keys)  # float32 values as the model sees them
    assert not np.array_equal(event_keys(x, seed=4), keys)
    y = x.copy()
    y[7, 299] += 1.0
    assert event_keys(y, seed=3)[7] != keys[7] and np.array_equal(np.delete(event_keys(y, 3), 7), np.delete(keys, 7))


@pytest.mark.parametrize(("n", "pairs"), [(10_000, 10), (40, 20), (12, 11)])
def test_hypercube_axes_are_distinct_reproducible_and_spread(n: int, pairs: int) -> None:
    keys = np.arange(2000, dtype=np.uint64) * np.uint64(7919)
    axes = hypercube_axes(keys, n, pairs)
    assert axes.shape == (2000, pairs) and axes.min() >= 0 and axes.max() < n
    assert all(len(set(row)) == pairs for row in axes.tolist())
    assert np.array_equal(hypercube_axes(keys[5:9], n, pairs), axes[5:9])
    counts = np.bincount(axes.ravel(), minlength=n)
    if n <= 40:  # every axis about equally often (a uniform draw without replacement)
        expected = 2000 * pairs / n
        assert counts.min() > 0.8 * expected and counts.max() < 1.2 * expected


def test_hypercube_axes_take_every_axis_when_pairs_cover_them() -> None:
    axes = hypercube_axes(np.arange(3, dtype=np.uint64), 4, 4)
    assert axes.tolist() == [[0, 1, 2, 3]] * 3


def test_add_hypercube_offsets_moves_one_pixel_per_point_in_pairs() -> None:
    centres = np.arange(2 * 6, dtype=np.float32).reshape(2, 6)
    step = np.linspace(0.5, 3.0, 6).astype(np.float32)
    axes = np.array([[4, 1], [0, 5]])
    ball = np.repeat(centres[:, None, :], 4, axis=1)
    add_hypercube_offsets(ball, axes, step)
    diff = ball - centres[:, None, :]
    for e in range(2):
        for i, a in enumerate(axes[e]):
            expected = np.zeros(6, dtype=np.float32)
            expected[a] = step[a]
            assert np.array_equal(diff[e, i], expected) and np.array_equal(diff[e, i + 2], -expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("simplex", BallSpec("simplex")),
        ("simplex+anti", BallSpec("simplex+anti")),
        (" rotations:7 ", BallSpec("rotations", 7)),
        ("hypercube:32", BallSpec("hypercube", 32)),
        ("auto", BallSpec("auto")),
    ],
)
def test_parse_ball_reads_every_setting(text: str, expected: BallSpec) -> None:
    assert parse_ball(text) == expected


def test_ball_spec_prints_as_its_setting() -> None:
    assert [str(parse_ball(s)) for s in ("simplex+anti", "rotations:3", "hypercube:8")] == [
        "simplex+anti",
        "rotations:3",
        "hypercube:8",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sphere", "ball 'sphere' is not one of simplex, simplex\\+anti, rotations:K, hypercube:m, auto"),
        ("rotations:0", "ball 'rotations:0': rotations:K needs K >= 1"),
        ("hypercube:3", "ball 'hypercube:3': hypercube:m needs an even m >= 2"),
        ("hypercube:0", "ball 'hypercube:0': hypercube:m needs an even m >= 2"),
        ("rotations:-2", "ball 'rotations:-2' is not one of"),
    ],
)
def test_parse_ball_rejects_bad_settings(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_ball(text)
