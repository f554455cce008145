"""Offline commands on every core: runs cut into parts run at once give the scores of a single-threaded run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from numpy.typing import NDArray

import monitor
from monitor.config import ModelSettings
from monitor.cpus import available_cpus
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.session import offline_options
from monitor.model.split_runs import MIN_PART_ROWS, SplitSession, part_bounds
from monitor.offline.rows import load_model
from tests.unit import onnx_graphs

SINGLE = OnnxRuntimeOptions(intra_op_threads=1)


class _Recording:
    """A fake session: output ``x * 2`` and the rows of every call, and the threads that ran them. With
    ``meet``, the first call waits (10 s at most) until a second thread calls."""

    def __init__(self, *, meet: bool = False) -> None:
        self.rows: list[int] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()
        self._second = threading.Event()
        if not meet:
            self._second.set()

    def get_inputs(self) -> list[str]:
        return ["x"]

    def run(self, names: list[str], feed: dict[str, NDArray[Any]], run_options: Any = None) -> list[Any]:
        with self._lock:
            self.rows.append(int(feed["x"].shape[0]))
            self.threads.add(threading.get_ident())
            if len(self.threads) > 1:
                self._second.set()
        self._second.wait(10.0)
        return [feed["x"] * 2, feed["x"][:, :1]]


def test_a_run_is_cut_into_parts_and_joined_in_order() -> None:
    fake = _Recording(meet=True)
    session = SplitSession(fake, 2, rows_per_item=MIN_PART_ROWS)  # an item is as many model rows as a slice needs
    x = np.arange(14.0).reshape(7, 2)
    doubled, first = session.run(["y", "z"], {"x": x, "held": np.arange(7)})
    np.testing.assert_array_equal(doubled, x * 2)
    np.testing.assert_array_equal(first, x[:, :1])
    assert fake.rows == [1] * 7  # as many slices as the rows fill (4 per thread at most)
    assert len(fake.threads) == 2  # the caller's and a pool thread
    assert session.get_inputs() == ["x"]  # the session's own attributes


@pytest.mark.parametrize(
    ("feed", "rows_per_item"),
    [
        ({"x": np.ones((1, 2))}, MIN_PART_ROWS),
        ({"x": np.ones((4, 2)), "held": np.ones(3)}, MIN_PART_ROWS),
        ({"x": np.ones((2 * MIN_PART_ROWS - 1, 2))}, 1),
        ({"x": np.ones((13, 2))}, MIN_PART_ROWS // 8),
    ],
    ids=["one row", "feeds without a common batch axis", "too few model rows", "too few events"],
)
def test_a_run_that_cannot_be_cut_runs_whole(feed: dict[str, NDArray[Any]], rows_per_item: int) -> None:
    fake = _Recording()
    SplitSession(fake, 2, rows_per_item=rows_per_item).run(["y", "z"], feed)
    assert fake.rows == [feed["x"].shape[0]]


def test_a_run_gets_as_many_slices_as_its_rows_fill_up_to_four_per_thread() -> None:
    fake = _Recording()
    SplitSession(fake, 4, rows_per_item=1).run(["y", "z"], {"x": np.ones((3 * MIN_PART_ROWS, 2))})
    assert fake.rows == [MIN_PART_ROWS] * 3
    fake = _Recording()
    SplitSession(fake, 2, rows_per_item=1).run(["y", "z"], {"x": np.ones((100 * MIN_PART_ROWS, 2))})
    assert fake.rows == [100 * MIN_PART_ROWS // 8] * 8


def test_part_bounds_cover_the_rows_in_equal_parts() -> None:
    assert part_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert part_bounds(2, 8) == [(0, 1), (1, 2)]


def test_offline_options_use_every_cpu_unless_threads_are_set(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")  # a quota of one CPU
    assert offline_options(0, root=tmp_path) == OnnxRuntimeOptions(intra_op_threads=1, split_runs=1)
    assert offline_options(3, root=tmp_path, max_rows_per_run=5) == OnnxRuntimeOptions(
        intra_op_threads=3, max_rows_per_run=5
    )
    free = tmp_path / "free"
    free.mkdir()
    assert offline_options(0, root=free).split_runs == available_cpus(free)


def test_offline_commands_split_runs_and_run_keeps_one_run_per_call(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "clf.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])
    ms = ModelSettings.model_construct(name="clf", path=path)
    served = OnnxModel.from_settings(ms)
    assert served.options.split_runs == 1 and isinstance(served._session, ort.InferenceSession)
    for offline in (OnnxModel.from_settings(ms, offline=True), load_model(path)):
        assert (offline.options.intra_op_threads, offline.options.split_runs) == (1, available_cpus())
        assert isinstance(offline._session, SplitSession) == (available_cpus() > 1)


def _gradient_boosting(path: Path) -> Path:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import GradientBoostingClassifier

    x, y = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3, random_state=0)
    est = GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(x, y)
    return onnx_graphs.sklearn_to_onnx(path, est, 6, zipmap=False)


def _mlp(path: Path) -> Path:
    from sklearn.datasets import make_classification
    from sklearn.neural_network import MLPClassifier

    x, y = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3, random_state=1)
    est = MLPClassifier(hidden_layer_sizes=(16,), max_iter=300, random_state=0).fit(x, y)
    return onnx_graphs.sklearn_to_onnx(path, est, 6, zipmap=False)


def _regressor(path: Path) -> Path:
    return onnx_graphs.polynomial_regressor(path, 6, [onnx_graphs.squared_norm(6)])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    ("build", "exact"),
    [(_gradient_boosting, True), (_mlp, False), (_regressor, True)],
    ids=["gbdt", "mlp", "regressor"],
)
@pytest.mark.parametrize("rows_in_graph", [True, False], ids=["rows in graph", "rows in numpy"])
def test_scores_on_split_runs_match_a_single_threaded_run(
    tmp_path: Path, build: Any, exact: bool, rows_in_graph: bool
) -> None:
    """Identical for a tree ensemble and an elementwise model (each row's sums in the same order in any part);
    within float32 rounding for a matrix product, whose kernel may group a row's sums by the run's row count."""
    path = build(tmp_path / "model.onnx")
    rows = np.random.default_rng(3).normal(size=(300, 6))
    rows[7, 2] = np.nan  # an invalid row stays invalid
    tables = []
    for options in (SINGLE, OnnxRuntimeOptions(intra_op_threads=1, split_runs=3)):
        model = OnnxModel(path, OnnxRuntimeOptions(**{**_fields(options), "rows_in_graph": rows_in_graph}))
        assert isinstance(model._session, SplitSession) == (options.split_runs > 1)
        tables.append(monitor.score(model, rows, reference=rows[50:], flicker_copies=8, batch_rows=128))
    single, split = tables
    assert single.columns.keys() == split.columns.keys()
    for name, values in single.columns.items():
        if exact or name in ("class", "flicker"):
            np.testing.assert_array_equal(split.columns[name], values, err_msg=name)
        else:
            np.testing.assert_allclose(split.columns[name], values, rtol=1e-5, atol=1e-6, err_msg=name)


def _fields(options: OnnxRuntimeOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in OnnxRuntimeOptions.__dataclass_fields__}
