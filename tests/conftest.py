"""Shared fakes and fixtures: counting wrappers around real models, tiny ONNX models built per test."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor.model.base import ModelKind, ModelOutput
from monitor.model.onnx import OnnxModel
from tests.unit import onnx_graphs


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """Each test leaves the root logger as it found it. A CLI entry point installs a handler on the stderr it
    sees, which under ``capsys`` is a stream closed when the test ends: a later test in the same process (the
    order differs per xdist worker) that logs without installing its own would write to it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    kafka = {name: (lg.level, lg.filters[:]) for name, lg in _kafka_loggers()}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    # kafka-python's loggers too: a source installs a filter holding back connection lines, setup_logging sets
    # levels; a later test on the same worker that expects those lines would otherwise depend on the order
    for name, lg in _kafka_loggers():
        was, filters = kafka.get(name, (logging.NOTSET, []))
        lg.setLevel(was)  # (clears the loggers' level caches)
        lg.filters[:] = filters


def _kafka_loggers() -> list[tuple[str, logging.Logger]]:
    return [
        (name, lg)
        for name, lg in logging.root.manager.loggerDict.items()
        if (name == "kafka" or name.startswith("kafka.")) and isinstance(lg, logging.Logger)
    ]


class CountingPredictor:
    """A :class:`Predictor` that delegates to a real model and records every ``evaluate`` call's row count."""

    def __init__(self, model: OnnxModel) -> None:
        self.model = model
        self.calls: list[int] = []

    @property
    def n_features(self) -> int:
        return self.model.n_features

    @property
    def kind(self) -> ModelKind:
        return self.model.kind

    @property
    def has_logits(self) -> bool:
        return self.model.has_logits

    @property
    def has_proba(self) -> bool:
        return self.model.has_proba

    def evaluate(self, rows: NDArray[np.float32]) -> ModelOutput:
        self.calls.append(int(rows.shape[0]))
        return self.model.evaluate(rows)


class CountingSession:
    """Wraps an onnxruntime session and records the batch size of every ``run``."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.batch_sizes: list[int] = []

    def run(self, names: list[str], feeds: dict[str, NDArray[Any]]) -> list[NDArray[Any]]:
        self.batch_sizes.append(int(next(iter(feeds.values())).shape[0]))
        result: list[NDArray[Any]] = self._session.run(names, feeds)
        return result


@pytest.fixture
def linear_classifier_model(tmp_path: Path) -> OnnxModel:
    """2-D, 2 classes: logit1 − logit0 = x1 − x2 + 0.2, exposing logits, probabilities and label."""
    return OnnxModel(onnx_graphs.linear_classifier(tmp_path / "clf.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]))


@pytest.fixture
def curved_classifier_model(tmp_path: Path) -> OnnxModel:
    """2-D, 3 classes with quadratic logits (logit_k = x·W_k + b_k + q_k·‖x‖²), exposing all three outputs."""
    weights = [[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]]
    return OnnxModel(
        onnx_graphs.linear_classifier(tmp_path / "curved.onnx", weights, [0.1, 0.0, -0.2], curvature=[0.4, -0.3, 0.1])
    )


@pytest.fixture
def norm_regressor_model(tmp_path: Path) -> OnnxModel:
    """y = ‖x‖² in 3-D."""
    return OnnxModel(onnx_graphs.polynomial_regressor(tmp_path / "norm.onnx", 3, [onnx_graphs.squared_norm(3)]))
