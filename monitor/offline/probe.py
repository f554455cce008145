""":func:`probe` (``harmonic-monitor probe``): the probe funnel on rows as one region, and its result
(:class:`ProbeReport`: the funnel's typed result and the JSON report the command writes)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from monitor.errors import DataError
from monitor.offline.baseline import SPACE, Baseline, load_baseline
from monitor.offline.frames import pandas_module
from monitor.offline.keywords import StandardizeKeywords, split_keywords
from monitor.offline.rows import MODEL_KIND, DataLike, ModelLike, Rows, int_labels, load_model, model_path, read_rows

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from monitor.model.onnx import OnnxModel
    from monitor.probes.funnel import FunnelResult
    from monitor.probes.offline import ProbeOptions


@dataclass(frozen=True)
class ProbeReport:
    """:func:`probe`'s result: the funnel's typed result and the JSON report ``harmonic-monitor probe`` writes."""

    result: FunnelResult
    report: Mapping[str, Any]

    @property
    def mri(self) -> dict[str, float]:
        """Perturbation type → MRI r (the share of outputs unchanged at the moderate intensity)."""
        return {} if self.result.mri is None else dict(self.result.mri.vector)

    def to_frame(self) -> Any:
        """One row per threshold search: perturbation, feature, ε*."""
        pd = pandas_module()
        return pd.DataFrame(
            [
                {"perturbation": t.perturbation, "feature": t.feature, "eps_star": t.result.eps_star}
                for t in self.result.thresholds
            ],
            columns=["perturbation", "feature", "eps_star"],
        )


def probe(
    model: ModelLike,
    data: DataLike,
    reference: Any = None,
    *,
    options: ProbeOptions | None = None,
    budget_rows: int | None = None,
    steps: int | None = None,
    eps: float | None = None,
    seed: int | None = None,
    labels: Any = None,
    model_kind: str = MODEL_KIND,
    header: str = "auto",
    data_path: str | None = None,
    reference_path: str | None = None,
    **standardize: Unpack[StandardizeKeywords],
) -> ProbeReport:
    """Run the probe funnel on the rows of ``data`` as one region (``harmonic-monitor probe``, the same report).

    ``options``: :class:`monitor.probes.offline.ProbeOptions` (the command's defaults: certified radius with 32
    copies, no L2 boundary search …); ``budget_rows``, ``steps``, ``eps`` and ``seed`` override its values.
    ``reference``: what standardizes ε (rows, a reference JSON or :func:`reference`'s result; default the data), in
    ``space``, ``scale`` and ``channel_axis`` (:class:`~monitor.offline.keywords.StandardizeKeywords`);
    ``labels``: true class indices, one per row. ``data_path``/``reference_path``: the names the report records
    (default: the paths given, if paths).

    Examples
    --------
    >>> import numpy as np, monitor
    >>> from monitor.examples import linear_classifier
    >>> r = monitor.probe(linear_classifier(), np.random.default_rng(3).normal(size=(5, 3)), steps=0)
    >>> sorted(r.mri)[:2], r.result.n_points
    (['dropout', 'gamma_ascent'], 5)
    """
    from monitor.probes.offline import probe_region

    (std,) = split_keywords("probe", standardize, StandardizeKeywords)
    opts = _options(options, budget_rows=budget_rows, steps=steps, eps=eps, seed=seed)
    m = load_model(model, model_kind=model_kind)
    rows = read_rows(data, m, header=header)
    if not np.all(np.isfinite(rows.x)):
        raise DataError(f"{rows.source}: rows with NaN or infinite values cannot be probed; remove them")
    if data_path is None and isinstance(data, (str, os.PathLike)):
        data_path = str(data)
    if reference_path is None and isinstance(reference, (str, os.PathLike)):
        reference_path = str(reference)
    _name_features(m, data_path, header)
    base = load_baseline(reference, m, rows, header=header, **std)
    space = std.get("space", SPACE)
    ref_rows = base.rows
    y = None if labels is None else int_labels(np.asarray(labels).reshape(-1))
    if y is not None and y.shape[0] != len(rows):
        raise DataError(f"labels: {y.shape[0]} values for {len(rows)} rows; expected one class index per row")
    result, doc = probe_region(
        m,
        base.standardizer,
        rows.x,
        rows.held,
        opts,
        space=space,
        model_path=model_path(model),
        reference=None if ref_rows is None else ref_rows.x,
        reference_held=None if ref_rows is None else ref_rows.held,
        fill=_fill(base, rows) if space == "raw" else None,
        labels=y,
        data_path=data_path,
        reference_path=reference_path,
    )
    return ProbeReport(result, doc)


def _options(
    options: ProbeOptions | None, *, budget_rows: int | None, steps: int | None, eps: float | None, seed: int | None
) -> ProbeOptions:
    """``options`` (default the command's) with the values given here in place of its own."""
    from monitor.probes.offline import ProbeOptions

    opts = options if options is not None else ProbeOptions()
    funnel = opts.funnel
    funnel = funnel if steps is None else dataclasses.replace(funnel, steps=steps)
    funnel = funnel if eps is None else dataclasses.replace(funnel, eps=eps)
    funnel = funnel if seed is None else dataclasses.replace(funnel, seed=seed)
    opts = dataclasses.replace(opts, funnel=funnel)
    return opts if budget_rows is None else dataclasses.replace(opts, budget_rows=budget_rows)


def _name_features(model: OnnxModel, data_path: str | None, header: str) -> None:
    """A plain model's features named by the header of the CSV the rows came from."""
    if model.signature.plain and data_path is not None and data_path.lower().endswith(".csv"):
        from monitor.model.io import read_rows as read_csv_rows

        names = read_csv_rows(data_path, header).names  # type: ignore[arg-type]
        if names is not None:
            model.name_features(names, source=f"--data '{data_path}' header")


def _fill(base: Baseline, rows: Rows) -> NDArray[np.float64]:
    """What dropout writes in ``raw`` space: the reference's (or the data's) mean, in raw units."""
    if base.reference is not None:
        return base.reference.feature_mean
    return np.asarray((base.rows.x if base.rows is not None else rows.x).mean(axis=0), dtype=np.float64)
