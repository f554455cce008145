"""Reference: bounded samples, exact moments, JSON round trip, warm-up builder."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest

from monitor.errors import ConfigError, DataError
from monitor.rolling.reference import Reference, thin_sorted
from monitor.rolling.warmup import WarmupReferenceBuilder
from monitor.runtime.state import encode_state


def data(n: int = 20_000, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    gamma = rng.lognormal(np.log(1e-3), 1.5, n)
    gamma[rng.random(n) < 0.4] = 0.0
    flicker = np.where(rng.random(n) < 0.05, rng.integers(1, 17, n) / 32, 0.0)
    return {
        "gamma": gamma,
        "flicker": flicker,
        "features": rng.normal(size=(n, 4)) * [1.0, 10.0, 0.1, 1.0],
        "predicted_class": rng.integers(0, 2, n),
    }


def test_reference_samples_are_bounded_and_sorted() -> None:
    d = data()
    ref = Reference.from_arrays(**d, max_sample=1000, max_feature_sample=500)
    assert ref.gamma_sample.size == 1000 and ref.flicker_sample.size == 1000
    assert np.all(np.diff(ref.gamma_sample) >= 0)
    assert ref.feature_sample.shape == (500, 4)
    assert ref.n_events == 20_000


def test_reference_moments_are_exact_over_all_events() -> None:
    d = data()
    ref = Reference.from_arrays(**d, max_sample=100)
    assert ref.gamma_mean == pytest.approx(d["gamma"].mean())
    assert ref.flicker_mean == pytest.approx(d["flicker"].mean())
    assert ref.flicker_var == pytest.approx(d["flicker"].var())
    np.testing.assert_allclose(ref.feature_mean, d["features"].mean(axis=0))
    np.testing.assert_allclose(ref.feature_std, d["features"].std(axis=0))
    assert sum(ref.class_mix.values()) == pytest.approx(1.0)


def test_thinned_sample_keeps_quantiles_and_zero_ties() -> None:
    d = data()
    thin = thin_sorted(d["gamma"], 1000)
    for q in (0.3, 0.5, 0.9, 0.99):
        lo, hi = np.quantile(d["gamma"], [max(q - 0.002, 0), min(q + 0.002, 1)])
        assert lo <= np.quantile(thin, q) <= hi
    assert np.mean(thin == 0.0) == pytest.approx(np.mean(d["gamma"] == 0.0), abs=1e-3)


def test_reference_round_trips_through_json() -> None:
    ref = Reference.from_arrays(**data(), feature_names=["a", "b", "c", "d"], max_sample=200, max_feature_sample=100)
    back = Reference.from_dict(json.loads(json.dumps(ref.to_dict())))
    np.testing.assert_array_equal(back.gamma_sample, ref.gamma_sample)
    np.testing.assert_array_equal(back.feature_sample, ref.feature_sample)
    assert back.flicker_mean == ref.flicker_mean and back.flicker_count == ref.flicker_count
    assert back.class_mix == ref.class_mix and back.feature_names == ("a", "b", "c", "d")


def test_state_file_writes_the_reference_encoded_once_as_json_dumps_would(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = Reference.from_arrays(**data(), feature_names=["a", "b", "c", "d"], max_sample=200, max_feature_sample=100)
    calls: list[int] = []
    to_dict = Reference.to_dict
    monkeypatch.setattr(Reference, "to_dict", lambda self: calls.append(1) or to_dict(self))
    plain = {"version": 1, "counters": [["x", 1.0]], "models": {"m": {"watch": {"reference": to_dict(ref)}}}}
    for _ in range(3):  # every checkpoint writes the same text; the reference is encoded at the first only
        doc = {"version": 1, "counters": [["x", 1.0]], "models": {"m": {"watch": {"reference": ref.encoded()}}}}
        assert encode_state(doc) == json.dumps(plain, default=float)
    assert len(calls) == 1
    # a replaced reference (a new object: references are frozen) is encoded afresh
    assert dataclasses.replace(ref, held_tables={"c": {"x": 1}}).encoded().text != ref.encoded().text
    assert Reference.from_dict(json.loads(encode_state({"r": ref.encoded()}))["r"]).n_events == ref.n_events


def test_reference_same_seed_same_sample() -> None:
    a = Reference.from_arrays(**data(), max_feature_sample=100, seed=3)
    b = Reference.from_arrays(**data(), max_feature_sample=100, seed=3)
    np.testing.assert_array_equal(a.feature_sample, b.feature_sample)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(format="other"), "not a reference dict"),
        (lambda d: d.pop("gamma_sample"), "malformed"),
        (lambda d: d.update(n_events=-1), "malformed"),
        (lambda d: d.update(feature_std=[1.0]), "different lengths"),
        (lambda d: d.update(class_mix=[1]), "malformed"),
    ],
)
def test_reference_from_dict_rejects_bad_input(mutate: object, match: str) -> None:
    d = Reference.from_arrays(**data(200)).to_dict()
    mutate(d)  # type: ignore[operator]
    with pytest.raises(DataError, match=match):
        Reference.from_dict(d)


def test_reference_from_arrays_rejects_bad_input() -> None:
    d = data(100)
    with pytest.raises(DataError, match="reference arrays disagree: 100 feature rows, 99"):
        Reference.from_arrays(gamma=d["gamma"][:99], flicker=d["flicker"], features=d["features"])
    with pytest.raises(DataError, match="NaN or infinite"):
        Reference.from_arrays(gamma=d["gamma"], flicker=d["flicker"], features=d["features"] * np.nan)
    with pytest.raises(ConfigError, match="must be >= 10"):
        Reference.from_arrays(**d, max_sample=5)


def test_warmup_builder_collects_exactly_n_events() -> None:
    d = data(3000)
    b = WarmupReferenceBuilder(events=2500)
    for i in range(0, 3000, 700):
        assert b.ready == (i >= 2500)
        b.update(**{k: v[i : i + 700] for k, v in d.items()})
    assert b.ready and b.count == 2500
    ref = b.build()
    assert ref.n_events == 2500 and ref.gamma_mean == pytest.approx(d["gamma"][:2500].mean())


def test_warmup_builder_refuses_to_build_early_and_resets() -> None:
    b = WarmupReferenceBuilder(events=100)
    b.update(gamma=np.zeros(10), flicker=np.zeros(10), features=np.zeros((10, 2)))
    with pytest.raises(DataError, match="warm-up has 10 of 100 events"):
        b.build()
    b.reset()
    assert b.count == 0 and not b.ready


def test_warmup_builder_rejects_a_changed_feature_count() -> None:
    b = WarmupReferenceBuilder(events=100).update(gamma=[0.0], flicker=[0.0], features=[[0.0, 1.0]])
    with pytest.raises(DataError, match="warm-up batch has 3 features; earlier batches had 2"):
        b.update(gamma=[0.0], flicker=[0.0], features=[[0.0, 1.0, 2.0]])


def test_warmup_builder_rejects_bad_settings() -> None:
    with pytest.raises(ConfigError, match="warm-up needs events >= 10"):
        WarmupReferenceBuilder(events=5)
