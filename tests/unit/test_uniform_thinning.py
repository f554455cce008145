from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from monitor.runtime.scoring import UniformThinner
from monitor.sampler.base import ModelSamplingStats, StratumStats


def _stratum(weight: float) -> StratumStats:
    return StratumStats(0, 0, 0, 0, 0, 1.0 / weight, weight, 1.0 / weight)


class _BiasedSampler:
    biases_class_mix = True

    def snapshot(self) -> dict[str, ModelSamplingStats]:
        strata = {"0": _stratum(20.0), "1": _stratum(2.0)}  # common class 0 sampled at 5 %, rare class 1 at 50 %
        return {"m": ModelSamplingStats("m", 10.0, 200.0, 0, 0, 0, 0, 0, 0.05, 20.0, strata)}


def _thin(sampler: object, weights: np.ndarray) -> np.ndarray | None:
    return UniformThinner(sampler, seed=0).keep("m", weights)  # type: ignore[arg-type]


def test_uniform_subset_restores_uniform_inclusion_of_a_stratified_sample() -> None:
    # offered: 90 % class 0, 10 % class 1; stratified keep: class 0 at 1/20, class 1 at 1/2
    rng = np.random.default_rng(1)
    offered = rng.random(400_000) < 0.1
    kept = np.where(offered, rng.random(offered.size) < 0.5, rng.random(offered.size) < 0.05)
    weights = np.where(offered[kept], 2.0, 20.0)
    keep = _thin(_BiasedSampler(), weights)
    assert keep is not None
    share_rare = float(offered[kept][keep].mean())
    assert abs(share_rare - 0.1) < 0.01  # back to the offered mix (the stratified sample had ~53 % rare)
    assert float(offered[kept].mean()) > 0.5


def test_uniform_subset_is_none_for_samplers_without_class_bias() -> None:
    assert _thin(SimpleNamespace(), np.ones(10)) is None
