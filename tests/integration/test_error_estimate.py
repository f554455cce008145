"""A regressor's error without labels end to end: ``reference --labels`` with true values, ``harmonic-monitor run``
as a process on a real Kafka 0.9 broker, and a real Prometheus that scrapes it and stores
``harmonic_estimated_error`` (per window, method and loss) and ``harmonic_reference_error``.

The regressor is a scikit-learn linear regression (ONNX) whose error grows with |x2|; the events move x2 by 1, so
the estimated MAE rises above the reference's. The reference carries a segment column and the events one segment:
its own reference error is exported beside the model-wide one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from numpy.typing import NDArray

import monitor
from tests.integration.brokers import Kafka09Broker
from tests.integration.sidecar import sidecar_in
from tests.integration.test_prometheus_scrape import PrometheusService
from tests.integration.test_run_kafka import group_name, produce

pytestmark = pytest.mark.integration

MODEL = "price"
EVENTS = 300


def rows(seed: int, n: int, shift: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x[:, 2] += shift
    return x, x[:, 0] + 0.5 * x[:, 1] + rng.normal(size=n) * (0.2 + np.abs(x[:, 2]))


def test_run_exports_a_regressors_estimated_error_that_prometheus_stores(
    kafka09_broker: Kafka09Broker, tmp_path: Path
) -> None:
    from sklearn.linear_model import LinearRegression

    from monitor.model.convert import convert_estimator

    x, y = rows(0, 600, 0.0)
    model = convert_estimator(LinearRegression().fit(x, y), 3, tmp_path / "price.onnx")
    xr, yr = rows(1, 800, 0.0)
    # the reference carries each row's segment: north's own reference error is what north's window compares with
    frame = pd.DataFrame({"a": xr[:, 0], "b": xr[:, 1], "c": xr[:, 2], "region": ["north", "south"] * 400})
    ref = monitor.reference(
        model, frame, labels=yr, segment_column="region", feature_names=("a", "b", "c"), flicker_copies=4,
        out=tmp_path / "ref.json",
    )  # fmt: skip
    assert ref.loss_fit is not None and set(ref.loss_fit.segments) == {"north", "south"}
    topic = f"error-{group_name()}"
    kafka09_broker.create_topic(topic, 1)
    now_ms = int(time.time() * 1000)
    xs, _ = rows(2, EVENTS, 1.0)
    messages = [
        (f"e{i}".encode(), json.dumps({"id": f"e{i}", "ts": now_ms + 10 * i, "model": MODEL, "segment": "north",
                                       "features": xs[i].tolist()}).encode())
        for i in range(EVENTS)
    ]  # fmt: skip
    produce(kafka09_broker, topic, messages)
    config = tmp_path / "monitor.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": MODEL, "path": str(model), "reference": str(tmp_path / "ref.json")}],
                "sampler": {"events_per_second": 0},
                "accuracy": {"interval_seconds": 0.5},
            }
        )
    )
    with sidecar_in(tmp_path, kafka09_broker, topic=topic, group_id=group_name(), config=config) as sidecar:
        sidecar.wait_ready()
        with PrometheusService(sidecar.port) as prom:
            window = {"model": MODEL, "window": "last_2000", "method": "iw", "loss": "mae"}
            sel = ",".join(f'{k}="{v}"' for k, v in window.items())
            est = prom.wait_for_samples(f"harmonic_estimated_error{{{sel}}}")
            lower = prom.wait_for_samples(f"harmonic_estimated_error_lower{{{sel}}}")
            upper = prom.wait_for_samples(f"harmonic_estimated_error_upper{{{sel}}}")
            reference = prom.wait_for_samples(f'harmonic_reference_error{{model="{MODEL}",loss="mae"}}')
            value = float(est[0]["value"][1])
            assert float(lower[0]["value"][1]) <= value <= float(upper[0]["value"][1])
            assert float(reference[0]["value"][1]) == pytest.approx(ref.loss_fit.mae, rel=1e-6)
            assert value > ref.loss_fit.mae  # the window's inputs moved where the model errs more
            rmse = prom.wait_for_samples(f'harmonic_estimated_error{{model="{MODEL}",loss="rmse",method="dle"}}')
            assert rmse
            own = prom.wait_for_samples(
                f'harmonic_segment_reference_error{{model="{MODEL}",segment="north",loss="mae"}}'
            )
            assert float(own[0]["value"][1]) == pytest.approx(ref.loss_fit.segments["north"]["mae"], rel=1e-6)
