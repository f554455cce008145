"""The probe funnel: cheaper than exhaustive threshold search, same fragile targets; budgets; the JSON report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.errors import ConfigError
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.mri import open_session
from monitor.probes.report import build_report, write_report
from monitor.probes.threshold import TargetThreshold, threshold_profile
from tests.unit.test_probes_models import binary_linear, linear_regressor

#: a sparse linear classifier: features 0–2 matter, 3–5 are ignored
W = np.array([3.0, -2.0, 1.5, 0.0, 0.0, 0.0])
ETA = 0.01


@pytest.fixture
def sparse_model(tmp_path: Path) -> OnnxModel:
    return binary_linear(tmp_path / "sparse.onnx", W, 0.0)


def _region(seed: int, b: int = 30) -> np.ndarray:
    """B points with logit margins uniform in [0.02, 0.3]: close to the boundary, as a flagged region is."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, W.size))
    out: np.ndarray = x * (rng.uniform(0.02, 0.3, size=b) / np.abs(x @ W))[:, None]
    return out


def _exhaustive(model: OnnxModel, x: np.ndarray, cfg: FunnelConfig) -> tuple[list[TargetThreshold], int]:
    """Threshold search on every target, as if there were no funnel; returns the profile and its model rows."""
    session, targets = open_session(
        model, Standardizer.identity(W.size), x, perturbations=cfg.perturbations, seed=cfg.seed, radius=cfg.radius
    )
    profile = threshold_profile(session, targets, delta=cfg.delta, eps_max=cfg.eps_max, eta=cfg.eta)
    return profile, session.evaluations


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_funnel_costs_less_than_exhaustive_search_and_finds_the_same_fragile_targets(
    sparse_model: OnnxModel, seed: int
) -> None:
    cfg = FunnelConfig(perturbations=("noise", "shift", "gamma_ascent"), steps=0, seed=seed, eta=ETA, search_all=False)
    x = _region(seed)
    result = run_funnel(sparse_model, Standardizer.identity(W.size), x, cfg)
    profile, exhaustive_rows = _exhaustive(sparse_model, x, cfg)

    crossed = {t.key for t in profile if t.result.crossed}
    assert {f.key for f in result.fragile} == crossed == {"noise", "shift[0]", "shift[1]", "shift[2]"}
    found = {t.key: t.result.eps_star for t in result.thresholds}
    for t in profile:
        eps_funnel = found.get(t.key)
        if t.key in found:
            assert eps_funnel is not None and t.result.eps_star is not None
            assert abs(eps_funnel - t.result.eps_star) <= ETA  # both brackets hold the crossing
    ev = result.evaluations
    assert result.funnel_rows == ev["mri"] + ev["sensitivity"] + ev["threshold"]
    assert result.funnel_rows < exhaustive_rows <= result.exhaustive_rows
    assert result.exhaustive_min_rows <= exhaustive_rows


@pytest.mark.parametrize("seed", [0, 3])
def test_funnel_never_misses_a_target_that_breaks_at_the_screening_intensity(
    sparse_model: OnnxModel, seed: int
) -> None:
    cfg = FunnelConfig(steps=0, seed=seed, eta=ETA, search_all=False)  # every perturbation type, the screen
    x = _region(seed)
    result = run_funnel(sparse_model, Standardizer.identity(W.size), x, cfg)
    profile, exhaustive_rows = _exhaustive(sparse_model, x, cfg)
    breaks_early = {t.key for t in profile if t.result.eps_star is not None and t.result.eps_star <= cfg.eps - ETA}
    assert breaks_early <= {f.key for f in result.fragile}
    assert {"shift[3]", "shift[4]", "shift[5]"}.isdisjoint(f.key for f in result.fragile)
    assert result.funnel_rows < exhaustive_rows


def test_funnel_reports_algorithm_2_per_point(sparse_model: OnnxModel) -> None:
    x = _region(0, b=6)
    result = run_funnel(sparse_model, Standardizer.identity(W.size), x, FunnelConfig(steps=2, radius=0.1))
    assert result.adversarial is not None
    assert result.adversarial.flip_step.shape == (6,)
    assert result.evaluations["adversarial"] == result.adversarial.evaluations
    assert result.complete and result.stopped_at is None


def test_funnel_stops_within_budget_and_keeps_the_finished_stages(sparse_model: OnnxModel) -> None:
    x = _region(0)
    standardizer = Standardizer.identity(W.size)
    cfg = FunnelConfig(perturbations=("noise", "shift"), steps=0)
    full = run_funnel(sparse_model, standardizer, x, cfg)
    budget = full.evaluations["mri"] + full.evaluations["sensitivity"] + 150
    cut = run_funnel(sparse_model, standardizer, x, cfg, budget_rows=budget)
    assert not cut.complete and cut.stopped_at == "threshold"
    assert cut.total_rows == sum(cut.evaluations.values()) <= budget
    assert full.mri is not None and cut.mri is not None and cut.mri.vector == full.mri.vector
    assert len(cut.thresholds) < len(full.thresholds)
    tiny = run_funnel(sparse_model, standardizer, x, cfg, budget_rows=x.shape[0] + 10)
    assert tiny.stopped_at == "mri" and tiny.mri is not None and tiny.mri.missing


def test_funnel_on_a_regressor_searches_the_relative_output_change(tmp_path: Path) -> None:
    model = linear_regressor(tmp_path / "r.onnx", [[1.0], [0.0]], [0.0])
    x = np.random.default_rng(0).normal(size=(20, 2))
    cfg = FunnelConfig(perturbations=("shift",), steps=0, eps=0.5, delta=0.2, search_all=False)
    result = run_funnel(model, Standardizer.identity(2), x, cfg, output_scale=np.array([1.0]))
    # C = 1 − |Δ|/1 = 1 − ε for feature 0, so P(ε) < 1 − 0.2 from ε = 0.2 on; feature 1 never moves y
    (only,) = result.thresholds
    assert (only.perturbation, only.feature) == ("shift", 0)
    assert only.result.eps_star is not None and abs(only.result.eps_star - 0.2) <= cfg.eta


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"perturbations": ("blur",)}, "perturbation 'blur' is not one of"),
        ({"eps": 0.0}, "eps .* must be a finite number > 0; got 0.0"),
        ({"mri_cut": 1.5}, r"mri_cut must be in \(0, 1\]; got 1.5"),
        ({"eta": 2.0, "eps_max": 1.0}, "η .* below ε_max = 1.0; got 2.0"),
        ({"sensitivity_draws": 0}, "sensitivity_draws must be >= 1; got 0"),
        ({"steps": -1}, "steps .* must be >= 0; got -1"),
    ],
)
def test_funnel_config_rejects_bad_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FunnelConfig(**kwargs)  # type: ignore[arg-type]


def test_report_is_strict_json_with_the_fixed_keys(sparse_model: OnnxModel, tmp_path: Path) -> None:
    cfg = FunnelConfig(perturbations=("noise", "shift", "quantize"), steps=1, radius=0.1)
    result = run_funnel(sparse_model, Standardizer.identity(W.size), _region(1, b=10), cfg)
    report = build_report(result, space="raw", model_path="sparse.onnx")
    path = write_report(report, tmp_path / "probe.json")
    loaded = json.loads(path.read_text(encoding="utf-8"))
    assert list(loaded["mri"]) == ["noise", "shift", "quantize"]
    assert set(loaded["evaluations"]) >= {"mri", "sensitivity", "threshold", "exhaustive"}
    assert all(isinstance(v, int) for v in loaded["evaluations"].values())
    assert loaded["thresholds"], "the sparse model has fragile targets"
    assert [row["key"] for row in loaded["thresholds"]] == list(result.targets)  # every target, searched or not
    for row in loaded["thresholds"]:
        assert set(row) >= {"perturbation", "feature", "eps_star", "eps_max", "status", "reason", "searched"}
        assert row["eps_max"] == (None if row["status"] == "not_searched" else cfg.eps_max)
        assert (row["feature"] is None) == (row["perturbation"] != "shift")
    assert len(loaded["mri_shift_by_feature"]) == W.size
    assert len(loaded["sensitivity"]["matrix"]) == 2  # two class probabilities × τ
    assert len(loaded["adversarial"]["points"]) == 10
    assert loaded["consistency"]["baseline"] == pytest.approx(
        loaded["consistency"]["agreement"] ** loaded["consistency"]["n_configurations"]
    )


def test_searching_every_target_the_threshold_stage_stays_within_exhaustive_and_the_funnel_adds_the_mri(
    sparse_model: OnnxModel,
) -> None:
    """With the defaults every target is searched: the threshold stage costs at most what searching every target
    alone would (less its clean and direction rows), while the funnel adds the MRI and sensitivity rows on top, so
    it is not bounded by ``exhaustive`` (docs/PROBES.md)."""
    cfg = FunnelConfig(perturbations=("noise", "shift", "gamma_ascent"), steps=0, seed=0, eta=ETA)
    x = _region(0)
    result = run_funnel(sparse_model, Standardizer.identity(W.size), x, cfg)
    ev = result.evaluations
    assert ev["threshold"] <= result.exhaustive_rows - x.shape[0]
    assert result.funnel_rows == ev["mri"] + ev["sensitivity"] + ev["threshold"]
    assert ev["mri"] > 0.2 * result.exhaustive_rows  # the ordering stages are no small share of it
