"""The probe funnel over one region of points with everything ``harmonic-monitor probe`` reports: the funnel
(:func:`monitor.probes.funnel.run_funnel`), exact tree thresholds, the nearest L2 boundary and the certified radius
(:func:`probe_region`; :func:`monitor.probe` and the ``probe`` command both call it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.config import ProbeRunSettings, setting_default
from monitor.errors import ProbeError
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.probes.boundary import minimal_l2
from monitor.probes.certify import certificate_report, certify_points
from monitor.probes.funnel import FunnelConfig, FunnelResult, run_funnel
from monitor.probes.profile import FeatureInfo, held_names
from monitor.probes.report import JsonValue, build_report
from monitor.probes.trees import tree_splits

#: reference rows the L2 boundary search may bisect towards (nearest of another class)
ANCHORS = 200


@dataclass(frozen=True)
class ProbeOptions:
    """What a probe runs beyond its points: the funnel's settings, a model-row budget (None: none), the L2 boundary
    search, the certified radius (``certify_copies`` Gaussian copies per point; 0 skips it) and whether a tree
    ensemble's single-feature shifts are bisected rather than read from its splits. The defaults are the command's,
    declared in :class:`monitor.config.ProbeRunSettings`.
    """

    funnel: FunnelConfig = field(default_factory=FunnelConfig)
    budget_rows: int | None = None
    l2_boundary: bool = setting_default(ProbeRunSettings, "l2_boundary")
    certify_copies: int = setting_default(ProbeRunSettings, "certify_copies")
    certify_sigma: float = setting_default(ProbeRunSettings, "certify_sigma")
    certify_alpha: float = setting_default(ProbeRunSettings, "certify_alpha")
    certify_select: int = setting_default(ProbeRunSettings, "certify_select")
    bisect_trees: bool = setting_default(ProbeRunSettings, "bisect_trees")


def probe_region(
    model: OnnxModel,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    held: Held | None,
    options: ProbeOptions,
    *,
    space: str,
    model_path: str,
    reference: NDArray[np.float64] | None = None,
    reference_held: Held | None = None,
    fill: NDArray[np.float64] | None = None,
    labels: NDArray[np.int64] | None = None,
    data_path: str | None = None,
    reference_path: str | None = None,
) -> tuple[FunnelResult, dict[str, Any]]:
    """Probe ``points`` (finite rows) as one region; the funnel's result and the JSON report (schema:
    ``docs/PROBES.md``). ``reference``: rows for feature spreads, L2 anchors and a regressor's output scale
    (default the points); ``fill``: dropout's value per feature in raw space."""
    if options.budget_rows is not None and options.budget_rows < 1:
        raise ProbeError(f"the budget must be a positive number of model rows; got {options.budget_rows}")
    extra: dict[str, int] = {}
    output_scale = None
    if reference is not None and model.kind == "regressor":
        output_scale, extra["reference"] = reference_output_scale(model, reference, reference_held)
    splits = None if options.bisect_trees else tree_splits(model_path, model.n_features, plain=model.signature.plain)
    base = reference if reference is not None else points
    features = FeatureInfo.build(
        model.feature_names,
        standardizer,
        reference=base,
        held=held_names(model.signature),
        mark_zero_spread=space != "raw",
    )
    result = run_funnel(
        model,
        standardizer,
        points,
        options.funnel,
        budget_rows=options.budget_rows,
        fill=fill,
        output_scale=output_scale,
        labels=labels,
        held=held,
        features=features,
        splits=splits,
    )
    report = build_report(
        result,
        space=space,
        model_path=model_path,
        data_path=data_path,
        reference_path=reference_path,
        extra_evaluations=extra,
        points=points,
    )
    report["trees"] = None if splits is None else {"nodes": list(splits.nodes), "exact_shift": True}
    left = None if options.budget_rows is None else options.budget_rows - result.total_rows
    if options.l2_boundary:
        report["boundary_l2"] = _boundary(model, standardizer, points, held, report, base)
        section = report["boundary_l2"]
        used = section.get("rows") if isinstance(section, dict) else None
        if isinstance(used, int):
            left = None if left is None else left - used
            evaluations = report.get("evaluations")
            if isinstance(evaluations, dict):
                evaluations["boundary_l2"] = used
    report["certified"] = _certified(options, model, standardizer, points, held, left)
    evaluations = report.get("evaluations")
    certified = report["certified"]
    if isinstance(evaluations, dict) and isinstance(certified, dict) and isinstance(certified.get("rows"), int):
        evaluations["certify"] = certified["rows"]
    return result, report


def reference_output_scale(
    model: OnnxModel, reference: NDArray[np.float64], held: Held | None = None
) -> tuple[NDArray[np.float64], int]:
    """(D,) the std of a regressor's outputs on the reference rows (constant outputs get 1), and the rows used."""
    ok = np.all(np.isfinite(reference), axis=1)
    finite = reference[ok]
    out = model.evaluate(finite.astype(np.float32), None if held is None else held.take(ok))
    assert out.value is not None
    std = out.value.astype(np.float64).std(axis=0)
    return np.where(std > 1e-12, std, 1.0), int(finite.shape[0])


def _certified(
    options: ProbeOptions,
    model: OnnxModel,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    held: Held | None,
    budget_left: int | None,
) -> JsonValue:
    """The report's ``certified`` object (None when skipped; a status and reason where it does not apply)."""
    k = int(options.certify_copies)
    if k == 0:
        return None
    if k < 1:
        raise ProbeError(f"certify_copies must be >= 0 (0 skips the certified radius); got {k}")
    if model.kind != "classifier":
        return {"status": "not_applicable", "reason": "a certified radius is for classifiers; this is a regressor"}
    needed = points.shape[0] * (k + 1)
    if budget_left is not None and needed > budget_left:
        return {
            "status": "not_computed",
            "reason": f"budget: {needed} model rows needed, {max(budget_left, 0)} left of the budget",
        }
    cert, rows = certify_points(
        model,
        standardizer,
        points,
        held=held,
        copies=k,
        sigma=float(options.certify_sigma),
        alpha=float(options.certify_alpha),
        select=int(options.certify_select),
        seed=int(options.funnel.seed),
    )
    out: dict[str, Any] = {"status": "certified", **certificate_report(cert, rows=rows)}
    return out


def _boundary(
    model: OnnxModel,
    standardizer: Standardizer,
    points: NDArray[np.float64],
    held: Held | None,
    report: dict[str, Any],
    reference: NDArray[np.float64],
) -> dict[str, Any]:
    """The report's ``boundary_l2`` object: each point's nearest boundary in L2 beside the single-feature ε*; up to
    :data:`ANCHORS` reference rows (or data rows) serve as anchors (:func:`minimal_l2`)."""
    if model.kind != "classifier" or not model.has_proba:
        return {"status": "not_applicable", "reason": "the L2 boundary search needs a classifier with probabilities"}
    finite = reference[np.all(np.isfinite(reference), axis=1)]
    pick = np.random.default_rng(0).choice(finite.shape[0], min(ANCHORS, finite.shape[0]), replace=False)
    found = minimal_l2(model, standardizer, points, held=held, anchors=finite[pick])
    shifts = [t for t in report.get("thresholds", []) if t.get("perturbation") == "shift" and t.get("crossed")]
    best = min(shifts, key=lambda t: t["eps_star"], default=None)
    ok = np.isfinite(found.distance)
    return {
        "status": "searched",
        "method": "black-box DeepFool steps on finite-difference gradients of the log-odds margin, then bisection",
        "units": "standardized L2" if report.get("space") == "standardized" else "raw L2",
        "found_points": int(np.count_nonzero(ok)),
        "median_distance": float(np.median(found.distance[ok])) if ok.any() else None,
        "min_distance": float(found.distance[ok].min()) if ok.any() else None,
        "single_feature_min_eps_star": None if best is None else best["eps_star"],
        "single_feature_min_name": None if best is None else best.get("name"),
        "rows_per_point": float(found.rows.mean()),
        "points": [
            {
                "index": i,
                "status": found.status[i],
                "distance": float(found.distance[i]) if ok[i] else None,
                "reason": found.reason[i],
                "rows": int(found.rows[i]),
            }
            for i in range(points.shape[0])
        ],
        "anchors": int(pick.size),
        "rows": int(found.rows.sum()) + int(pick.size),
    }
