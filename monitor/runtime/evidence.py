"""What an alert says fired: each detector that fired and each input that moved, in its own numbers.

:func:`detector_evidence` reads a segment's verdict engine, its baseline and its count window, and returns the
clauses of HarmonicHarmfulShift's and HarmonicInputDrift's descriptions (:class:`~monitor.alerts.Evidence`):
the detector's statistic and the threshold it crossed, and the quantity it watches in the window against the
baseline. An input's clause starts with the input's name and names its test first; no clause holds ``; `` (the
separator between clauses).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.alerts import Evidence
from monitor.config import DriftSettings
from monitor.drift.verdict import VerdictEngine
from monitor.rolling.reference import Reference

#: moved inputs named (with their numbers) in an alert, per input test
ALERT_INPUTS = 5


def detector_evidence(
    engine: VerdictEngine, baseline: Reference, count: Any, detectors: DriftSettings
) -> tuple[tuple[Evidence, ...], tuple[Evidence, ...]]:
    """(output detectors that fired, inputs that moved), each in its own numbers: the detector's statistic and
    threshold, and the quantity it watches over the last ``drift.window`` events of ``count`` (a segment's count
    window) vs the segment's ``baseline``. At most :data:`ALERT_INPUTS` inputs per input test."""
    w = detectors.window

    def recent(signal: str) -> NDArray[np.float64]:
        v = np.asarray(count.values(signal), dtype=np.float64)[-w:]
        return v[np.isfinite(v)]

    outputs: list[Evidence] = []
    q = f"{detectors.cusum_quantile * 100:g}th percentile"
    cusums = (
        (engine.gamma_cusum, recent("gamma"), "γ"),
        (engine.flicker_cusum, recent("flicker"), "flicker"),
        (engine.confidence_cusum, 1.0 - recent("confidence"), "1 − max-probability"),
        (engine.margin_cusum, 1.0 - recent("margin"), "1 − margin"),
    )
    for det, values, label in cusums:
        if det is None or not det.drift_detected:
            continue
        share = float(np.mean(values > det.cutoff)) if values.size else float("nan")
        outputs.append(
            Evidence(
                det.name,
                det.statistic,
                det.threshold,
                share,
                det.null_rate,
                f"share of {label} above the reference's {q}, last {values.size} events",
                "CUSUM",
            )
        )
    ks = engine.gamma_ks.state
    if ks.drift_detected:
        g = recent("gamma")
        outputs.append(
            Evidence(
                ks.name,
                ks.statistic,
                ks.threshold,
                float(g.mean()) if g.size else float("nan"),
                baseline.gamma_mean,
                f"γ mean (KS distance vs its floor, p = {ks.p_value:.2g}), last {g.size} events",
                "KS distance",
            )
        )
    rate = engine.flicker_rate
    if rate.drift_detected:
        f = recent("flicker")
        outputs.append(
            Evidence(
                rate.name,
                rate.statistic,
                float("nan"),
                float(f.mean()) if f.size else float("nan"),
                baseline.flicker_mean,
                f"flicker mean (z test, p = {rate.p_value:.2g} < {rate.alpha:g}, rise >= {rate.min_increase:g}), "
                f"last {f.size} events",
                "z",
            )
        )
    inputs: list[Evidence] = []
    fd = engine.feature_drift
    if fd is not None and fd.drift_detected:
        x = np.asarray(count.features(), dtype=np.float64)[-w:]
        for m in fd.moved[:ALERT_INPUTS]:
            col = x[:, m.index] if x.ndim == 2 and x.shape[0] else np.zeros(0)
            col = col[np.isfinite(col)]
            inputs.append(
                Evidence(
                    m.name,
                    m.statistic,
                    fd.min_distance,
                    float(col.mean()) if col.size else float("nan"),
                    float(baseline.feature_mean[m.index]),
                    f"{fd.state.name}: KS distance vs its floor, adjusted p = {m.p_value:.2g}, the input's mean",
                    "KS distance",
                )
            )
    rd = engine.input_range
    if rd is not None and rd.drift_detected:
        for m in rd.moved[:ALERT_INPUTS]:
            lo, hi = float(rd.low[m.index]), float(rd.high[m.index])
            inputs.append(
                Evidence(
                    m.name,
                    m.statistic,
                    rd.min_share,
                    m.statistic,
                    float(rd.expected[m.index]),
                    f"{rd.state.name}: adjusted p = {m.p_value:.2g}, share outside the reference's 0.1–99.9 "
                    f"percentiles [{lo:.3g}, {hi:.3g}]",
                    "share out of range",
                )
            )
    pca = engine.input_pca
    if pca is not None and pca.drift_detected:
        st = pca.state
        inputs.append(
            Evidence(
                st.name,
                st.statistic,
                st.threshold,
                pca.window_mean_error,
                pca.reference_mean_error,
                f"how the inputs go together: KS distance vs its floor, p = {st.p_value:.2g}, mean PCA "
                f"reconstruction error ({pca.components} of {pca.mean.size} components)",
                "KS distance",
            )
        )
    hd = engine.held_drift
    if hd is not None and hd.drift_detected:
        unseen = hd.unseen_shares
        for m in hd.moved[:ALERT_INPUTS]:
            inputs.append(
                Evidence(
                    m.name,
                    m.statistic,
                    hd.min_distance,
                    float(unseen[m.index]),
                    float(hd.other_shares[m.index]),
                    f"{hd.state.name}: category frequencies by total variation distance, adjusted p = "
                    f"{m.p_value:.2g}, share of categories outside the reference's table",
                    "TV distance",
                )
            )
    return tuple(outputs), tuple(inputs)
