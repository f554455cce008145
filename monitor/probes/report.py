"""Probes: the JSON probe report of one funnel run (schema in ``docs/PROBES.md``).

:func:`build_report` turns a :class:`~monitor.probes.funnel.FunnelResult` into plain JSON values (NaN and ±inf
become null); :func:`write_report` writes it atomically. The fixed keys that other tools read are ``mri``,
``thresholds`` and ``evaluations``; everything else may grow.

``thresholds`` is the complete profile: one entry per (τ, feature) pair with ``status`` (``crossed``,
``not_crossed``, ``not_searched`` with its ``reason``), the range searched, the feature's ``name`` and, for a
feature shift, ε* in raw units beside the standardized one; then one ``not_searched`` entry (reason ``held``) per
element the model holds fixed.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from monitor.config import ScoringSettings, setting_default
from monitor.errors import DataError
from monitor.probes.funnel import FunnelConfig, FunnelResult
from monitor.probes.perturbations import SHIFT_GROUP_ABOVE, feature_groups
from monitor.probes.profile import REASONS, FeatureInfo, ProfileEntry
from monitor.probes.sensitivity import SensitivityResult

JsonValue: TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]

SCHEMA_VERSION = 1


def _num(value: float | np.floating | None) -> float | None:
    """A finite float, or None for None/NaN/inf."""
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _matrix(m: NDArray[np.float64]) -> list[JsonValue]:
    return [[_num(v) for v in row] for row in np.asarray(m, dtype=np.float64)]


def _output_names(kind: str, n_outputs: int) -> list[JsonValue]:
    stem = "p(class {})" if kind == "classifier" else "output {}"
    return [stem.format(i) for i in range(n_outputs)]


def _sensitivity(
    full: SensitivityResult | None, flagged: SensitivityResult | None, kind: str, n_outputs: int
) -> JsonObject | None:
    if full is None:
        return None
    names, by_type = full.by_type()
    shift = full.shift_by_feature()
    out: JsonObject = {
        "eps": full.eps,
        "outputs": _output_names(kind, n_outputs),
        "perturbations": list(names),
        "matrix": _matrix(by_type),
        "shift_by_feature": None if shift is None else _matrix(shift),
        "flagged": None,
    }
    if flagged is not None:
        out["flagged"] = {
            "draws": flagged.draws,
            "columns": list(flagged.columns),
            "matrix": _matrix(flagged.matrix),
            "rows": flagged.rows,
        }
    return out


def _raw(value: float | None, feature: int | None, features: FeatureInfo | None) -> float | None:
    """A standardized shift of ``feature`` in raw units (None for a τ that is not one feature's shift)."""
    if value is None or feature is None or features is None:
        return None
    return _num(value * float(features.scale[feature]))


def _entry(
    e: ProfileEntry, r: float | None, features: FeatureInfo | None, outside: NDArray[np.int64] | None
) -> JsonObject:
    """One threshold entry: the keys a search has always had, then status, reason, range, name and raw units."""
    t = e.threshold
    res = None if t is None else t.result
    feature = e.feature
    out: JsonObject = {
        "perturbation": e.perturbation,
        "feature": feature,
        "eps_star": None if res is None else _num(res.eps_star),
        "eps_max": None if res is None else res.eps_max,
        "crossed": False if res is None else res.crossed,
        "eps_low": None if res is None else _num(res.eps_low),
        "eps_high": None if res is None else _num(res.eps_high),
        "p0": None if res is None else _num(res.p0),
        "limit": None if res is None else _num(res.limit),
        "r": _num(r),
        "calls": 0 if res is None else res.calls,
        "rows": 0 if t is None else t.rows,
        "key": e.key,
        "status": e.status,
        "reason": e.reason,
        "reason_text": None if e.reason is None else REASONS[e.reason],
        "detail": e.detail,
        "searched": None if res is None else [0.0, _num(res.searched_to)],
        "method": None if t is None else t.method,
    }
    if feature is not None and features is not None:
        out["name"] = features.names[feature]
        out["raw_per_unit"] = _num(float(features.scale[feature]))
        out["eps_star_raw"] = None if res is None else _raw(res.eps_star, feature, features)
        out["eps_max_raw"] = None if res is None else _raw(res.eps_max, feature, features)
        out["searched_raw"] = None if res is None else [0.0, _raw(res.searched_to, feature, features)]
        if features.low is not None and features.high is not None:
            out["reference_range_raw"] = [_num(features.low[feature]), _num(features.high[feature])]
        out["outside_reference"] = None if outside is None else int(outside[feature])
    else:
        out["name"] = e.perturbation if feature is None else None
    return out


def build_report(
    result: FunnelResult,
    *,
    space: str = setting_default(ScoringSettings, "space"),
    model_path: str | os.PathLike[str] | None = None,
    data_path: str | os.PathLike[str] | None = None,
    reference_path: str | os.PathLike[str] | None = None,
    extra_evaluations: Mapping[str, int] | None = None,
    points: NDArray[np.floating] | None = None,
) -> JsonObject:
    """The probe report as a JSON object (see ``docs/PROBES.md`` for every key and its units).

    Parameters
    ----------
    result : a funnel run.
    space : ``standardized`` or ``raw``: the units of every ε in the report.
    model_path, data_path, reference_path : recorded as given (None = not recorded).
    extra_evaluations : more row counts to record beside the stages' (e.g. ``reference``).
    points : the probed (B, n) raw points: each threshold entry then counts those outside the reference range.
    """
    cfg = result.config
    mri = result.mri
    features = result.features
    outside = None if features is None or points is None else features.outside(points)
    thresholds = _thresholds(result, outside)
    return {
        "schema_version": SCHEMA_VERSION,
        "model": {
            "path": None if model_path is None else str(model_path),
            "kind": result.kind,
            "n_features": result.n_features,
            "n_outputs": result.n_outputs,
            "output_scale": [_num(v) for v in result.output_scale],
        },
        "data": None if data_path is None else str(data_path),
        "reference": None if reference_path is None else str(reference_path),
        "space": space,
        "n_points": result.n_points,
        "config": _config(cfg),
        "mri": {} if mri is None else {k: _num(v) for k, v in mri.vector.items()},
        "mri_by_target": {} if mri is None else {k: _num(v) for k, v in mri.by_target.items()},
        "mri_shift_by_feature": None
        if mri is None or mri.shift_by_feature is None
        else [_num(v) for v in mri.shift_by_feature],
        "sensitivity": _sensitivity(result.sensitivity_all, result.sensitivity, result.kind, result.n_outputs),
        "flagged": list(result.flagged),
        # above SHIFT_GROUP_ABOVE features each shift target is a group keyed by its first feature: its members
        "shift_groups": {str(g[0]): list(g) for g in feature_groups(result.n_features)}
        if result.n_features > SHIFT_GROUP_ABOVE and any(t.startswith("shift") for t in result.targets)
        else None,
        "fragile": [
            {
                "perturbation": f.perturbation,
                "feature": f.feature,
                "r": _num(f.r),
                "outputs": list(f.outputs),
                "sensitivity": [_num(v) for v in f.sensitivity],
            }
            for f in result.fragile
        ],
        "thresholds": thresholds,
        "profile": _profile_summary(thresholds),
        "features": None if features is None else _features(features, outside),
        "adversarial": _adversarial(result),
        "consistency": _consistency(result),
        "evaluations": _evaluations(result, extra_evaluations),
        "complete": result.complete,
        "stopped_at": result.stopped_at,
    }


def _thresholds(result: FunnelResult, outside: NDArray[np.int64] | None) -> list[JsonValue]:
    """One entry per profile target (searched or not, held features last); a result built without a profile: the
    searches alone, in their older shape."""
    mri, features = result.mri, result.features
    thresholds: list[JsonValue] = [
        _entry(e, None if mri is None else mri.by_target.get(e.key), features, outside) for e in result.profile
    ]
    thresholds.extend(
        {
            "perturbation": "shift",
            "feature": None,
            "eps_star": None,
            "eps_max": None,
            "crossed": False,
            "key": f"held[{name}]",
            "name": name,
            "status": "not_searched",
            "reason": "held",
            "reason_text": REASONS["held"],
            "detail": None,
            "searched": None,
        }
        for name in (() if features is None else features.held)
    )
    legacy: list[JsonValue] = [
        {
            "perturbation": t.perturbation,
            "feature": t.feature,
            "eps_star": _num(t.result.eps_star),
            "eps_max": t.result.eps_max,
            "crossed": t.result.crossed,
            "eps_low": _num(t.result.eps_low),
            "eps_high": _num(t.result.eps_high),
            "p0": _num(t.result.p0),
            "limit": _num(t.result.limit),
            "r": None if mri is None else _num(mri.by_target.get(t.key)),
            "calls": t.result.calls,
            "rows": t.rows,
        }
        for t in result.thresholds
    ]
    if not result.profile:  # a result built without a profile: the searches alone, as before
        return legacy
    return thresholds


def _adversarial(result: FunnelResult) -> JsonObject | None:
    """Algorithm 2's walk per point: where it flipped the class, and the largest γ on the way."""
    cfg = result.config
    adversarial: JsonObject | None = None
    if result.adversarial is not None:
        adv = result.adversarial
        adversarial = {
            "steps": cfg.steps,
            "radius": cfg.radius,
            "n_flipped": int(np.count_nonzero(adv.flip_step >= 0)),
            "points": [
                {
                    "index": i,
                    "flip_step": None if adv.flip_step[i] < 0 else int(adv.flip_step[i]),
                    "stable": bool(adv.flip_step[i] < 0),
                    "start_class": int(adv.start_class[i]),
                    "end_class": int(adv.end_class[i]),
                    "max_gamma": _num(float(np.nanmax(adv.gamma_path[i])) if adv.gamma_path.shape[1] else None),
                }
                for i in range(adv.flip_step.shape[0])
            ],
            "rows": adv.evaluations,
        }
    return adversarial


def _consistency(result: FunnelResult) -> JsonObject | None:
    """Output consistency over the noise configurations, and the points it held for."""
    consistency: JsonObject | None = None
    if result.consistency is not None:
        con = result.consistency
        consistency = {
            "eps": con.eps,
            "configurations": list(con.configurations),
            "n_configurations": len(con.configurations),
            "output_consistency": con.output_consistency,
            "agreement": con.agreement,
            "accuracy": _num(con.accuracy),
            "baseline": con.baseline,
            "baseline_from": "accuracy" if con.accuracy is not None else "agreement",
            "mean_score_std": _num(con.mean_score_std),
            "score_std": [_num(v) for v in con.score_std],
            "consistent": [bool(v) for v in con.per_point],
            "pdr": _num(con.pdr),
            "rows": con.rows,
        }
    return consistency


def _evaluations(result: FunnelResult, extra_evaluations: Mapping[str, int] | None) -> dict[str, JsonValue]:
    """Model rows per stage, the funnel's and the exhaustive search's totals, and ``extra_evaluations``."""
    evaluations: dict[str, JsonValue] = {k: int(v) for k, v in result.evaluations.items()}
    evaluations["funnel"] = result.funnel_rows
    evaluations["total"] = result.total_rows
    evaluations["exhaustive"] = result.exhaustive_rows
    evaluations["exhaustive_min"] = result.exhaustive_min_rows
    for k, v in (extra_evaluations or {}).items():
        evaluations[k] = int(v)
    return evaluations


def _config(cfg: FunnelConfig) -> JsonObject:
    """The funnel's settings as run."""
    return {
        "perturbations": list(cfg.perturbations),
        "eps": cfg.eps,
        "mri_cut": cfg.mri_cut,
        "sensitivity_cut": cfg.sensitivity_cut,
        "sensitivity_draws": cfg.sensitivity_draws,
        "delta": cfg.delta,
        "eps_max": cfg.eps_max,
        "eta": cfg.eta,
        "radius": cfg.radius,
        "ball": cfg.ball,
        "steps": cfg.steps,
        "seed": cfg.seed,
        "consistency_tolerance": cfg.consistency_tolerance,
        "search_all": cfg.search_all,
        "eps_start": cfg.eps_start,
    }


def _features(features: FeatureInfo, outside: NDArray[np.int64] | None) -> JsonObject:
    """The features' names, units and reference range, and how many probed points fall outside it."""
    return {
        "names": list(features.names),
        "raw_per_unit": [_num(v) for v in features.scale],
        "mean": [_num(v) for v in features.mean],
        "reference_low": None if features.low is None else [_num(v) for v in features.low],
        "reference_high": None if features.high is None else [_num(v) for v in features.high],
        "zero_spread": [features.names[j] for j in np.flatnonzero(features.zero_spread)],
        "held": list(features.held),
        "outside_reference": None
        if outside is None
        else {features.names[j]: int(outside[j]) for j in np.flatnonzero(outside)},
    }


def _profile_summary(thresholds: list[JsonValue]) -> JsonObject:
    """How many entries have each status, and each not-searched reason."""
    status: dict[str, JsonValue] = {"crossed": 0, "not_crossed": 0, "not_searched": 0}
    reasons: dict[str, JsonValue] = {}
    for t in thresholds:
        if not isinstance(t, dict):
            continue
        s = str(t.get("status"))
        count = status.get(s, 0)
        status[s] = (count if isinstance(count, int) else 0) + 1
        if t.get("reason") is not None:
            k = str(t["reason"])
            n = reasons.get(k, 0)
            reasons[k] = (n if isinstance(n, int) else 0) + 1
    return {"status": status, "reasons": reasons, "entries": len(thresholds)}


def write_report(report: JsonObject, path: str | os.PathLike[str]) -> Path:
    """Write ``report`` as indented JSON, atomically (temp file + rename in the same folder).

    Raises
    ------
    DataError
        The folder does not exist or is not writable.
    """
    out = Path(path)
    text = json.dumps(report, indent=2, allow_nan=False) + "\n"
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise DataError(f"cannot write the probe report to '{out}': folder '{folder}' does not exist", path=str(out))
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, out)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise DataError(f"cannot write the probe report to '{out}': {exc}", path=str(out)) from exc
    return out
