"""The pipeline's labels seam: delayed ground-truth labels joined to the predictions the sidecar scored.

:class:`LabelStage` decodes records from the labels topic, keeps each scored prediction (its class value,
confidence and class under small noise) until its label arrives or its time-to-live ends, and updates the
labelled windows: accuracy, resilience, reliability and the composite robustness. Each call returns a
:class:`~monitor.runtime.stage_results.LabelReport`; the pipeline's
:class:`~monitor.runtime.stage_fanout.StageFanout` writes its series and logs its invalid labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import NDArray

from monitor.config import Settings
from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent
from monitor.model.signature import Held
from monitor.rolling.labelled import LabelledWindow
from monitor.runtime.models import ModelRuntime
from monitor.runtime.stage_results import LabelledWindowState, LabelReport
from monitor.signals.scorer import ScoreResult
from monitor.source.base import RawRecord
from monitor.source.labels import JoinedLabel, LabelDecoder, LabelJoiner, ScoredPrediction


class LabelStage:
    """Joins delayed labels to scored predictions and keeps the labelled windows per model."""

    def __init__(self, settings: Settings, runtimes: Mapping[str, ModelRuntime], clock: Callable[[], float]) -> None:
        self.settings = settings
        self.runtimes = runtimes
        self.clock = clock
        self.decoder = LabelDecoder()
        self.joiner = LabelJoiner(settings.labels.ttl_seconds, settings.labels.max_predictions)
        self.windows: dict[str, LabelledWindow] = {}
        self._rng = np.random.default_rng(1)

    def record(self, record: RawRecord, now: float) -> LabelReport:
        """One record from the labels topic: decoded and joined, or returned as invalid with its reason."""
        report = LabelReport(consumed=1)
        try:
            label = self.decoder.decode(record.value, now=now)
            joined = self.joiner.add_label(label, now)
        except InvalidEventError as exc:
            report.invalid.append((exc.reason, str(exc)))
            return report
        except Exception as exc:  # noqa: BLE001 - a decoder bug: count the label, keep the loop
            report.invalid.append(("bad_label", f"{type(exc).__name__}: {exc}"))
            return report
        self._apply([joined] if joined is not None else [], report)
        return report

    def remember(
        self,
        rt: ModelRuntime,
        batch: list[InferenceEvent],
        rows: NDArray[np.float64],
        result: ScoreResult,
        held: Held | None = None,
    ) -> LabelReport:
        """Keep each scored prediction (class value, confidence, class under σ = 0.1 noise) until its label comes.

        One extra model call of 2·B rows (centres and one noisy copy each) gives the model's own class values, which
        is what labels carry.
        """
        assert rt.standardizer is not None
        report = LabelReport()
        ok = result.valid
        if not ok.any():
            return report
        x = rows[ok].astype(np.float32)
        sigma = (self.settings.labels.noise_sigma * rt.standardizer.scale).astype(np.float32)
        noisy = x + self._rng.standard_normal(x.shape, dtype=np.float32) * sigma
        both = None if held is None else Held.concat([held.take(ok)] * 2)
        out = rt.model.evaluate(np.vstack([x, noisy]), both)
        report.evaluations[rt.name] = float(2 * x.shape[0])
        values = out.raw_label if out.raw_label is not None and out.raw_label.dtype.kind in "iu" else out.label
        assert values is not None
        b = x.shape[0]
        now = self.clock()
        joined: list[JoinedLabel] = []
        for j, i in enumerate(np.flatnonzero(ok)):
            ev = batch[i]
            prediction = ScoredPrediction(
                ev.event_id,
                ev.model,
                ev.model_version,
                ev.segment,
                ev.timestamp_seconds,
                predicted_class=int(values[j]),
                confidence=None if not np.isfinite(result.probability[i]) else float(result.probability[i]),
                noisy_class=int(values[b + j]),
            )
            hit = self.joiner.add_prediction(prediction, now)
            if hit is not None:
                joined.append(hit)
        self._apply(joined, report)
        return report

    def _apply(self, joined: list[JoinedLabel], report: LabelReport) -> None:
        by_model: dict[str, list[JoinedLabel]] = {}
        for j in joined:
            by_model.setdefault(j.prediction.model, []).append(j)
        for model, items in by_model.items():
            window = self.windows.get(model)
            if window is None:
                window = self.windows[model] = LabelledWindow(self.settings.labels.window_events)
            window.update(
                [j.correct for j in items], [j.noisy_correct for j in items], [j.prediction.confidence for j in items]
            )
            q = window.get()
            stability = self._stability(model)
            composite = q.composite(stability) if np.isfinite(stability) else None
            report.windows.append(
                LabelledWindowState(
                    model, len(items), f"last_{window.size}", q.accuracy, q.resilience, q.reliability, composite
                )
            )
        report.unmatched_total = float(self.joiner.unmatched_labels_total)

    def _stability(self, model: str) -> float:
        """1 − mean flicker over the model's count windows (all segments)."""
        rt = self.runtimes.get(model)
        if rt is None or rt.watch is None:
            return float("nan")
        values = [rt.watch.windows.count_window(m, seg).values("flicker") for m, seg in rt.watch.windows.keys]
        flat = np.concatenate(values) if values else np.zeros(0)
        flat = flat[np.isfinite(flat)]
        return float(1.0 - flat.mean()) if flat.size else float("nan")
