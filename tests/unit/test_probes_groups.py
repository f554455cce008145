"""Probes at high dimension: above SHIFT_GROUP_ABOVE features the shift family is pixel patches, each target moving
its whole group, and the report lists every group's members."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.perturbations import (
    SHIFT_GROUP_ABOVE,
    FeatureShift,
    PerturbationContext,
    feature_groups,
    probe_targets,
)
from monitor.probes.report import build_report
from tests.unit import onnx_graphs


def test_groups_cover_every_feature_once() -> None:
    for n in (257, 400, 1000, 4096, 10_000):
        groups = feature_groups(n)
        flat = sorted(j for g in groups for j in g)
        assert flat == list(range(n)) and len(groups) <= 256


def test_square_inputs_get_square_patches() -> None:
    groups = feature_groups(4096)
    assert len(groups) == 256 and all(len(g) == 16 for g in groups)
    rows = {j // 64 for j in groups[17]}
    cols = {j % 64 for j in groups[17]}
    assert len(rows) == 4 and len(cols) == 4 and max(rows) - min(rows) == 3 and max(cols) - min(cols) == 3


def test_group_shift_moves_every_member() -> None:
    shift = FeatureShift(feature=2, sign=-1, group=(2, 5, 7))
    out = shift.apply(np.zeros((2, 9)), 0.5, np.random.default_rng(0))
    assert out[:, [2, 5, 7]].tolist() == [[-0.5] * 3] * 2 and np.count_nonzero(out) == 6
    assert shift.key == "shift[2]-"


def test_targets_are_groups_only_above_the_width() -> None:
    n = 400
    context = PerturbationContext(Standardizer.identity(n))
    targets = probe_targets(["shift"], context)
    assert len(targets) == len(feature_groups(n)) == 100
    assert all(t.feature == t.group[0] and len(t.members) == 2 for t in targets)
    small = probe_targets(["shift"], PerturbationContext(Standardizer.identity(SHIFT_GROUP_ABOVE)))
    assert len(small) == SHIFT_GROUP_ABOVE and all(t.group == () for t in small)


def test_funnel_on_an_image_model_reports_the_groups(tmp_path: Path) -> None:
    n = 400
    model = OnnxModel(onnx_graphs.logits_network(tmp_path / "img.onnx", n, 3, hidden=8), model_kind="classifier")
    points = np.random.default_rng(0).uniform(0, 255, size=(5, n))
    config = FunnelConfig(eps=20.0, radius=100.0, steps=2, perturbations=("shift", "noise"))
    result = run_funnel(model, Standardizer.identity(n), points, config)
    report = build_report(result, space="raw")
    groups = report["shift_groups"]
    assert isinstance(groups, dict) and len(groups) == 100
    assert sorted(j for members in groups.values() for j in members) == list(range(n))  # type: ignore[union-attr]
    assert sum(1 for t in result.targets if t.startswith("shift[")) == 100
