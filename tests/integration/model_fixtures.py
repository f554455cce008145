"""A small real model for the end-to-end tests: a seeded scikit-learn classifier converted to ONNX.

Test tooling, not a pipeline stage. :func:`build_classifier` trains a ``LogisticRegression`` on a seeded
``make_classification`` problem, converts it with the project's own converter, writes a reference CSV, and
keeps a disjoint pool of rows to send as live events, together with the ONNX copy's own predicted class for
each (so that a test knows exactly which live labels agree with the copy and which do not).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

#: Width of the model input.
N_FEATURES = 6
#: Rows written to the reference CSV (scored once when ``run`` starts: keep it small).
REFERENCE_ROWS = 200
#: Rows available as live events.
EVENT_ROWS = 800
#: Events whose ONNX probability is this close to 0.5 are left out of the pool: a batch-size-dependent last bit
#: of float32 arithmetic must not decide whether a live label "agrees".
_MIN_MARGIN = 1e-3


@dataclass(frozen=True)
class ClassifierFiles:
    """What :func:`build_classifier` wrote and kept.

    Attributes
    ----------
    onnx_path, reference_path : the ONNX model and the reference CSV (``REFERENCE_ROWS`` × ``N_FEATURES``).
    feature_names : ``("f0", …)``, for configs that accept features as a name→value map.
    events : (n, N_FEATURES) float64 rows to send as live events (disjoint from the reference).
    onnx_labels : (n,) int64, the ONNX copy's predicted class for each row of ``events``.
    """

    onnx_path: Path
    reference_path: Path
    feature_names: tuple[str, ...]
    events: NDArray[np.float64]
    onnx_labels: NDArray[np.int64]


def build_classifier(directory: Path, seed: int = 0) -> ClassifierFiles:
    """Train, convert and write the model and its reference data under ``directory``."""
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    from monitor.model.convert import convert_estimator
    from monitor.model.onnx import OnnxModel

    x, y = make_classification(
        n_samples=REFERENCE_ROWS + EVENT_ROWS + 200,
        n_features=N_FEATURES,
        n_informative=4,
        n_redundant=1,
        random_state=seed,
    )
    train, rest = slice(0, 200), slice(200, None)
    estimator = LogisticRegression(max_iter=500).fit(x[train], y[train])
    directory.mkdir(parents=True, exist_ok=True)
    onnx_path = convert_estimator(estimator, N_FEATURES, directory / "classifier.onnx")
    pool = x[rest]
    reference = pool[:REFERENCE_ROWS]
    reference_path = directory / "reference.csv"
    np.savetxt(reference_path, reference, delimiter=",", fmt="%.17g")
    events = pool[REFERENCE_ROWS:]
    out = OnnxModel(onnx_path).evaluate(events.astype(np.float32))
    assert out.label is not None and out.proba is not None, "the converted classifier must expose label and proba"
    margin = np.abs(np.asarray(out.proba, dtype=np.float64)[:, 1] - 0.5)
    keep = margin > _MIN_MARGIN
    return ClassifierFiles(
        onnx_path=onnx_path,
        reference_path=reference_path,
        feature_names=tuple(f"f{i}" for i in range(N_FEATURES)),
        events=events[keep],
        onnx_labels=np.asarray(out.label, dtype=np.int64)[keep],
    )
