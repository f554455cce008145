"""Probes: exact single-feature thresholds for tree ensembles.

Along one feature j a tree ensemble is piecewise constant: its output changes only where x_j crosses one of the
ensemble's split thresholds on j. So the P(ε) of ``shift[j]`` is a step function whose steps lie at
ε = |t − x_ij| / s_j (t a threshold of feature j, x_i a probed point, s_j the standardizer's scale), and the
threshold ε* = inf{ε > 0 : P(ε) < P(0) − δ} is one of those values: :func:`exact_shift_threshold` evaluates the
model once inside every step (and, for equality splits, on every threshold itself) and returns it exactly, with no
bisection and no resolution η.

Where exactness holds (:func:`tree_splits` returns None, and the funnel bisects, everywhere else):

- the nodes ``TreeEnsembleClassifier`` and ``TreeEnsembleRegressor`` (``ai.onnx.ml`` opsets 1–3) and
  ``TreeEnsemble`` (``ai.onnx.ml`` opset 5) — the form LightGBM, XGBoost (onnxmltools) and scikit-learn
  (skl2onnx) conversions take;
- split modes BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ and BRANCH_NEQ (opset 5: modes 0–5); a
  set-membership split (opset 5 mode 6, BRANCH_MEMBER) is not handled;
- each tree node reads the model's one 2-D float input directly or through ``Cast``/``Identity`` and per-feature
  ``Scaler`` nodes (``(x − offset)·scale``, as skl2onnx writes a ``StandardScaler``): thresholds are mapped back
  to raw units through the scaler. Any other path from the input (a ``ColumnTransformer``'s gathers and concats, a
  linear model beside the trees, held inputs) makes the model not piecewise constant in a known way: bisection.
- float32: onnxruntime compares the float32 input with float32 thresholds; ε* is exact for the float64 step
  positions, and a shifted point is rounded to float32 before the model sees it — within one float32 ulp of x_j
  of the true step.

For ``shift[j]`` with both signs, a point is consistent at ε when the model agrees with its clean output at both
x ± ε·e_j; P(ε) is the mean over the points, constant between consecutive steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import numpy_helper

from monitor.model.base import ModelOutput
from monitor.probes.perturbations import ProbeSession, ProbeTarget
from monitor.probes.threshold import TargetThreshold, ThresholdResult

#: ``ai.onnx.ml`` nodes whose splits are read
TREE_OPS: frozenset[str] = frozenset({"TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble"})

#: split modes with an exact step (opsets 1–3 by name; opset 5 numbers them 0..5 in this order)
EXACT_MODES: tuple[str, ...] = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")

#: nodes allowed between the input and a tree node
_PASS_THROUGH: frozenset[str] = frozenset({"Cast", "Identity", "Scaler"})


@dataclass(frozen=True, slots=True)
class TreeSplits:
    """The split thresholds of a tree-ensemble model, per input feature, in raw units.

    Attributes
    ----------
    thresholds : one sorted array of distinct thresholds per feature (empty for a feature no split uses).
    equality : True when some split is BRANCH_EQ/NEQ (a step on the threshold itself).
    nodes : the tree nodes' op types, for reports.
    """

    thresholds: tuple[NDArray[np.float64], ...]
    equality: bool
    nodes: tuple[str, ...]


def _attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    return next((a for a in node.attribute if a.name == name), None)


def _node_splits(node: onnx.NodeProto) -> tuple[NDArray[np.int64], NDArray[np.float64], list[str]] | None:
    """(feature ids, thresholds, mode names) of the node's splits (leaves dropped), or None for a mode not handled."""
    features = _attr(node, "nodes_featureids")
    if features is None:
        return None
    ids = np.asarray(features.ints, dtype=np.int64)
    if node.op_type == "TreeEnsemble":
        splits, modes = _attr(node, "nodes_splits"), _attr(node, "nodes_modes")
        if splits is None or modes is None:
            return None
        values = numpy_helper.to_array(splits.t).astype(np.float64)
        codes = numpy_helper.to_array(modes.t).astype(np.int64)
        if np.any((codes < 0) | (codes >= len(EXACT_MODES))):
            return None  # BRANCH_MEMBER: a set of values per split
        return ids, values, [EXACT_MODES[c] for c in codes]
    as_tensor = _attr(node, "nodes_values_as_tensor")
    values_attr = _attr(node, "nodes_values")
    if as_tensor is not None:
        values = numpy_helper.to_array(as_tensor.t).astype(np.float64)
    elif values_attr is not None:
        values = np.asarray(values_attr.floats, dtype=np.float32).astype(np.float64)
    else:
        return None
    modes_attr = _attr(node, "nodes_modes")
    names = [m.decode() for m in modes_attr.strings] if modes_attr is not None else ["BRANCH_LEQ"] * ids.size
    keep = [i for i, m in enumerate(names) if m != "LEAF"]
    if any(names[i] not in EXACT_MODES for i in keep):
        return None
    return ids[keep], values[keep], [names[i] for i in keep]


def _scaler(node: onnx.NodeProto, n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    offset = _attr(node, "offset")
    scale = _attr(node, "scale")
    off = np.asarray(offset.floats if offset is not None else [0.0], dtype=np.float32).astype(np.float64)
    sc = np.asarray(scale.floats if scale is not None else [1.0], dtype=np.float32).astype(np.float64)
    return np.broadcast_to(off, (n,)).copy(), np.broadcast_to(sc, (n,)).copy()


def read_splits(graph: onnx.GraphProto, n_features: int) -> TreeSplits | None:
    """The split thresholds of ``graph`` in raw units of its one input, or None where exactness does not hold
    (see the module docstring)."""
    inputs = [i.name for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    if len(inputs) != 1:
        return None
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    # walk forward from the input through pass-through nodes, tracking raw = offset + y/scale for each tensor
    maps: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = {
        inputs[0]: (np.zeros(n_features), np.ones(n_features))
    }
    queue = [inputs[0]]
    trees: list[tuple[onnx.NodeProto, str]] = []
    while queue:
        name = queue.pop()
        for node in consumers.get(name, []):
            if node.op_type in TREE_OPS and node.domain == "ai.onnx.ml" and list(node.input) == [name]:
                trees.append((node, name))
                continue
            if node.op_type not in _PASS_THROUGH or len(node.input) != 1 or len(node.output) != 1:
                return None  # the input reaches the output another way: not piecewise constant by the trees alone
            if node.op_type == "Scaler" and node.domain != "ai.onnx.ml":
                return None
            off, sc = maps[name]
            if node.op_type == "Scaler":
                o2, s2 = _scaler(node, n_features)
                if np.any(s2 == 0):
                    return None
                # y2 = (y − o2)·s2 and raw = off + y/sc  ⇒  raw = off + (y2/s2 + o2)/sc
                maps[node.output[0]] = (off + o2 / sc, sc * s2)
            else:
                maps[node.output[0]] = (off, sc)
            queue.append(node.output[0])
    if not trees:
        return None
    per_feature: list[list[float]] = [[] for _ in range(n_features)]
    equality = False
    for node, source in trees:
        found = _node_splits(node)
        if found is None:
            return None
        ids, values, modes = found
        if ids.size and (ids.min() < 0 or ids.max() >= n_features):
            return None
        off, sc = maps[source]
        raw = off[ids] + values / sc[ids]
        for j, t in zip(ids.tolist(), raw.tolist(), strict=True):
            per_feature[j].append(t)
        equality = equality or any(m in ("BRANCH_EQ", "BRANCH_NEQ") for m in modes)
    return TreeSplits(
        thresholds=tuple(np.unique(np.asarray(v, dtype=np.float64)) for v in per_feature),
        equality=equality,
        nodes=tuple(sorted({node.op_type for node, _ in trees})),
    )


def tree_splits(path: str | Path, n_features: int, *, plain: bool = True) -> TreeSplits | None:
    """:func:`read_splits` of the ONNX file at ``path``; None for a model that is not plain (several inputs, held
    values) or that cannot be read."""
    if not plain:
        return None
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - onnx raises several types; the model loaded already, so bisect instead
        return None
    return read_splits(proto.graph, n_features)


def _consistency(session: ProbeSession, out: ModelOutput, idx: NDArray[np.intp]) -> NDArray[np.float64]:
    """Per row, the consistency of ``out`` with the clean output of point ``idx[row]`` (as the session defines it)."""
    if session.model.kind == "classifier":
        assert out.label is not None and session.clean.label is not None
        same: NDArray[np.float64] = (out.label == session.clean.label[idx]).astype(np.float64)
        return same
    delta = np.abs(session.scores(out) - session.clean_scores[idx]) / session.output_scale
    per_row: NDArray[np.float64] = np.clip(1.0 - delta, 0.0, 1.0).mean(axis=1)
    return per_row


@dataclass(frozen=True, slots=True)
class _Steps:
    """Consistency of one point under one sign of a shift, as a step function of the raw shift d ∈ [0, cap]."""

    bounds: NDArray[np.float64]  # 0 = b_0 < b_1 < … < b_m = cap: the steps are (b_k, b_{k+1})
    inside: NDArray[np.float64]  # (m,) the value inside each step
    points: NDArray[np.float64]  # distances with an equality step on them (empty without equality splits)
    at: NDArray[np.float64]  # the value exactly there

    def after(self, e: NDArray[np.float64]) -> NDArray[np.float64]:
        """The value just after each e (inside the step that starts at or contains e)."""
        k = np.clip(np.searchsorted(self.bounds, e, side="right") - 1, 0, self.inside.size - 1)
        out: NDArray[np.float64] = self.inside[k]
        return out

    def exactly(self, e: NDArray[np.float64]) -> NDArray[np.float64]:
        """The value at each e: an equality point's own value, else the step containing e."""
        out = self.after(e).copy()
        if self.points.size:
            pos = np.searchsorted(self.points, e)
            hit = (pos < self.points.size) & (self.points[np.minimum(pos, self.points.size - 1)] == e)
            out[hit] = self.at[pos[hit]]
        return out


def exact_shift_rows(x: NDArray[np.float64], thresholds: NDArray[np.float64], *, cap: float, equality: bool) -> int:
    """Model rows :func:`exact_shift_threshold` evaluates for the points' values ``x`` of one feature: per point and
    sign, one per step within ``cap`` (raw units) and, with equality splits, one per threshold inside it."""
    rows = 0
    for xi in x:
        for sign in (1.0, -1.0):
            d = sign * (thresholds - xi)
            d = d[(d >= 0) & (d <= cap)]
            rows += np.unique(np.concatenate([[0.0, cap], d])).size - 1
            if equality:
                rows += np.unique(d[d > 0]).size
    return rows


def exact_shift_threshold(
    session: ProbeSession,
    target: ProbeTarget,
    splits: TreeSplits,
    *,
    delta: float,
    eps_max: float,
) -> TargetThreshold:
    """ε* of ``shift[j]`` (both signs) from the split thresholds of feature j, exactly (see the module docstring).

    One model row per step within the cap (and per threshold with equality splits), per point and sign.
    ``eps_low`` = ``eps_high`` = ``eps_star`` when crossed; ``calls`` counts the candidate ε examined and
    ``trace`` holds P just after each of them.
    """
    if target.feature is None:
        raise ValueError("exact thresholds are for single-feature shifts")
    j = target.feature
    x = session.raw_points[:, j]
    s = float(session.standardizer.scale[j])
    cap = eps_max * s
    t = splits.thresholds[j]
    before = session.evaluations
    plan: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []  # (bounds, distances with equality steps)
    rows: list[NDArray[np.float64]] = []
    owner: list[NDArray[np.intp]] = []
    for i in range(x.shape[0]):
        for sign in (1.0, -1.0):
            d = sign * (t - x[i])
            d = d[(d >= 0) & (d <= cap)]
            bounds = np.unique(np.concatenate([[0.0, cap], d]))
            points = np.unique(d[d > 0]) if splits.equality else np.zeros(0)
            shifts = np.concatenate([0.5 * (bounds[:-1] + bounds[1:]), points])
            block = np.repeat(session.raw_points[i : i + 1], shifts.size, axis=0)
            block[:, j] += sign * shifts
            rows.append(block)
            owner.append(np.full(shifts.size, i, dtype=np.intp))
            plan.append((bounds, points))
    idx = np.concatenate(owner)
    held = None if session.held is None else session.held.take(idx)
    out = session.model.evaluate(np.vstack(rows).astype(np.float32), held)
    cons = _consistency(session, out, idx)
    steps: list[_Steps] = []
    at = 0
    for bounds, points in plan:
        m = bounds.size - 1
        steps.append(_Steps(bounds, cons[at : at + m], points, cons[at + m : at + m + points.size]))
        at += m + points.size
    candidates = np.unique(np.concatenate([b for b, _ in plan]))
    b = x.shape[0]
    after = np.ones((b, candidates.size))
    exact = np.ones((b, candidates.size))
    for k, st in enumerate(steps):
        i = k // 2
        after[i] = np.minimum(after[i], st.after(candidates))
        exact[i] = np.minimum(exact[i], st.exactly(candidates))
    p_after = after.mean(axis=0)
    p_exact = exact.mean(axis=0)
    p0 = float(_consistency(session, session.clean, np.arange(b, dtype=np.intp)).mean())
    limit = p0 - delta
    # the infimum: the first candidate where P just after it (a step below the cap) or at it (ε > 0) drops
    below = ((p_after < limit) & (candidates < cap)) | ((p_exact < limit) & (candidates > 0))
    trace = tuple((float(c / s), float(p)) for c, p in zip(candidates, p_after, strict=True))
    if not below.any():
        result = ThresholdResult(None, eps_max, None, eps_max, p0, limit, len(trace), trace)
    else:
        eps = float(candidates[np.flatnonzero(below)[0]] / s)
        result = ThresholdResult(eps, eps, eps, eps_max, p0, limit, len(trace), trace)
    return TargetThreshold(target.name, target.feature, result, session.evaluations - before, method="exact_tree")
