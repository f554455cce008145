"""The runtime's per-model record (monitor/runtime/models.py): ``model_kind`` reaches the loader, the output decision
is part of the reference's fingerprint, and a regressor's flicker tolerance is published as a gauge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.config import ModelSettings, load_settings
from monitor.exporters.prometheus import MetricsState
from monitor.runtime.models import load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.service import build_sampler
from monitor.source.replay import ReplaySource
from tests.unit import onnx_graphs


@pytest.mark.parametrize(("setting", "kind"), [("auto", "regressor"), ("classifier", "classifier")])
def test_load_model_runtime_reads_the_model_kind_setting(tmp_path: Path, setting: str, kind: str) -> None:
    path = onnx_graphs.logits_network(tmp_path / "net.onnx", 3, 10)
    rt = load_model_runtime(ModelSettings.model_validate({"name": "net", "path": path, "model_kind": setting}))
    assert rt.model.kind == kind


def test_model_runtime_fingerprint_changes_with_the_output_decision(tmp_path: Path) -> None:
    path = onnx_graphs.logits_network(tmp_path / "net.onnx", 3, 10)
    auto = load_model_runtime(ModelSettings(name="net", path=path)).fingerprint()
    forced = load_model_runtime(ModelSettings(name="net", path=path, model_kind="classifier")).fingerprint()
    assert auto["outputs"]["kind"] == "regressor" and forced["outputs"]["kind"] == "classifier"
    assert {k: v for k, v in auto.items() if k != "outputs"} == {k: v for k, v in forced.items() if k != "outputs"}


def test_pipeline_publishes_a_regressors_flicker_tolerance_in_output_units(tmp_path: Path) -> None:
    model_path = onnx_graphs.linear_regressor(tmp_path / "reg.onnx", [[2.0, 0.0], [0.0, -300.0]], [1.0, 5.0])
    reference = tmp_path / "ref.csv"
    np.savetxt(reference, np.random.default_rng(0).normal(size=(200, 2)), delimiter=",")
    settings = load_settings(
        None,
        {
            "models": [{"name": "reg", "path": str(model_path), "reference": str(reference)}],
            "state_dir": str(tmp_path / "state"),
            "probes": {"enabled": False},
        },
    )
    state = MetricsState()
    runtimes = [load_model_runtime(m) for m in settings.models]
    pipeline = Pipeline(settings, ReplaySource([]), runtimes, build_sampler(settings), state=state)
    scorer = pipeline.runtimes["reg"].scorer
    assert scorer is not None and scorer.flicker_tolerance is not None
    # the reference was scored at start-up: the gauge holds 0.1 × each output's IQR, in that output's units
    published = np.array([state.gauge(tel.FLICKER_TOLERANCE.name, ("reg", column)) for column in ("0", "1")])
    np.testing.assert_allclose(published.astype(np.float64), scorer.flicker_tolerance)
    assert published[1] == pytest.approx(150.0 * published[0], rel=0.1)  # |w| 300 vs 2 over the same reference
    pipeline.close()
