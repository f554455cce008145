"""The baselines a model's segments are judged against.

:class:`SegmentBaselines` keeps the model-wide reference (from reference data, a saved state, or learned from the
stream's first ``warmup_events`` events) and each segment's own baseline (from reference data that carries the
segment, a saved state, or the segment's own warm-up). A stream without named segments judges ``other`` against the
model-wide reference; once a named segment appears (``segmented``), ``other`` warms up a baseline of its own too.
It writes no metric and logs nothing: the watch publishes and logs what its methods return.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.drift.categories import count_tables
from monitor.rolling.reference import Reference
from monitor.rolling.segment_baselines import fold_segments, references_to_json, segment_references
from monitor.rolling.warmup import WarmupReferenceBuilder
from monitor.rolling.windows import OTHER, SignalBatch
from monitor.signals.scorer import ScoreResult

if TYPE_CHECKING:
    from monitor.runtime.watch import WatchConfig


@dataclass(frozen=True, slots=True)
class ScoredReferences:
    """The baselines of scored reference rows: the model-wide reference, and each segment's own where the rows
    carry their segment (None where they do not)."""

    reference: Reference
    segments: dict[str, Reference] | None


@dataclass(frozen=True, slots=True)
class WarmUpStep:
    """What one batch did to a segment's warm-up: whether it started it (the segment's first events), and the
    baseline it completed (at ``warmup_events`` events; the warm-up is then over), if any."""

    started: bool
    built: Reference | None


class SegmentBaselines:
    """The model-wide reference, the per-segment baselines and the warm-ups learning them."""

    def __init__(self, config: WatchConfig, feature_names: tuple[str, ...] | None) -> None:
        self.config = config
        self.feature_names = feature_names
        self.reference: Reference | None = None
        self._builder: WarmupReferenceBuilder | None = None
        #: segment → its own baseline: from reference data that carries the segment, or learned by its warm-up
        self.segment_references: dict[str, Reference] = {}
        #: segment → the warm-up collecting its first events (while it has no baseline)
        self._segment_builders: dict[str, WarmupReferenceBuilder] = {}
        #: a named segment (not ``other``) was seen: ``other`` is then a population of its own, not the whole stream
        self.segmented = False
        #: changes whenever a segment gets a baseline: the pipeline rewrites its baselines file only then
        self.version = 0

    def scored(
        self,
        rows: NDArray[np.float64],
        result: ScoreResult,
        segments: NDArray[np.str_] | None = None,
        held: dict[str, NDArray[np.str_]] | None = None,
    ) -> ScoredReferences:
        """The model-wide reference of scored reference rows (the valid ones) and, with ``segments`` (one label per
        row), each segment's own baseline (:func:`segment_references`)."""
        ok = result.valid
        valid_held = None if held is None else {k: v[ok] for k, v in held.items()}
        ref = Reference.from_arrays(
            gamma=result.gamma[ok],
            flicker=result.flicker[ok],
            features=rows[ok],
            predicted_class=result.predicted_class[ok],
            feature_names=self.feature_names,
            max_sample=self.config.detectors.reference_max_events,
            confidence=result.probability[ok],
            margin=result.margin[ok],
            held=valid_held,
        )
        per_segment = None
        if segments is not None:
            per_segment = segment_references(
                np.asarray(segments)[ok],
                gamma=result.gamma[ok],
                flicker=result.flicker[ok],
                features=rows[ok],
                predicted_class=result.predicted_class[ok],
                confidence=result.probability[ok],
                margin=result.margin[ok],
                feature_names=self.feature_names,
                max_segments=self.config.max_segments,
                max_sample=self.config.detectors.reference_max_events,
                held=valid_held,
                gamma_edges=ref.gamma_edges,  # the model's: its maps add up across segments
            )
        return ScoredReferences(ref, per_segment)

    def set_reference(self, ref: Reference) -> None:
        """The model-wide reference; its warm-up, if any, is over."""
        self.reference = ref
        self._builder = None

    def install(self, refs: dict[str, Reference]) -> None:
        """Give segments their own baselines; their warm-ups, if any, are over."""
        if refs:
            self.version += 1
        for segment, ref in refs.items():
            self.segment_references[segment] = ref
            self._segment_builders.pop(segment, None)

    def set_held_tables(self, held: dict[str, NDArray[np.str_]], segments: NDArray[np.str_] | None = None) -> None:
        """Count the held inputs' category tables over all reference rows (``held``: one column per held element;
        ``segments``: each row's segment, for the per-segment baselines), replacing those of the scored sample: a
        segment's own over its rows, a borrowed one's over all rows; a shrunk one keeps its mix's."""
        every = count_tables(held)
        if self.reference is not None:
            self.reference = dataclasses.replace(self.reference, held_tables=every)
        if segments is not None and self.segment_references:
            folded = fold_segments(segments, self.config.max_segments)
            for name, ref in list(self.segment_references.items()):
                kind = "own" if ref.basis is None else ref.basis.kind
                sel = folded == name
                if kind == "borrowed":
                    self.segment_references[name] = dataclasses.replace(ref, held_tables=every)
                elif kind == "own" and sel.any():
                    tables = count_tables({k: v[sel] for k, v in held.items()})
                    self.segment_references[name] = dataclasses.replace(ref, held_tables=tables)

    def baseline(self, segment: str) -> Reference | None:
        """The reference ``segment`` is judged against: its own (from reference data or its warm-up); the model-wide
        one for ``other`` while the stream has no named segment; None while it warms up."""
        ref = self.segment_references.get(segment)
        if ref is None and segment == OTHER and not self.segmented:
            return self.reference
        return ref

    @property
    def bases(self) -> dict[str, str]:
        """Each segment with a baseline, and what it is: ``own (600 rows)``, ``shrunk (80 rows, weight 0.40)``,
        ``borrowed (12 rows)`` (from reference rows, :mod:`monitor.rolling.segment_baselines`), ``own (2000
        events)`` (its warm-up, or a file written before the basis was kept); ``other`` of an unsegmented stream:
        ``model-wide (N rows)``."""
        out = {
            s: ref.basis.describe() if ref.basis is not None else f"own ({ref.n_events} events)"
            for s, ref in sorted(self.segment_references.items())
        }
        if OTHER not in out and not self.segmented and self.reference is not None:
            out[OTHER] = f"model-wide ({self.reference.n_events} rows)"
        return out

    @property
    def warming_up(self) -> dict[str, dict[str, int]]:
        """The segments still learning their baseline: ``{segment: {"events": seen, "of": needed}}``."""
        return {s: {"events": b.count, "of": b.events} for s, b in sorted(self._segment_builders.items())}

    def _new_builder(self, *, segment: bool = False) -> WarmupReferenceBuilder:
        """A warm-up; a segment's bins its Gamma Map on the model-wide reference's γ edges where there is one."""
        edges = self.reference.gamma_edges if segment and self.reference is not None else None
        return WarmupReferenceBuilder(
            self.config.warmup_events,
            feature_names=self.feature_names,
            max_sample=self.config.detectors.reference_max_events,
            gamma_edges=edges,
        )

    def warm_up(self, batch: SignalBatch, held: dict[str, NDArray[np.str_]] | None = None) -> Reference | None:
        """Feed the model-wide reference's warm-up; at ``warmup_events`` events returns the reference it built."""
        if self._builder is None:
            self._builder = self._new_builder()
        _feed(self._builder, batch, held)
        return self._builder.build() if self._builder.ready else None

    def segment_warm_up(
        self, segment: str, batch: SignalBatch, held: dict[str, NDArray[np.str_]] | None = None
    ) -> WarmUpStep:
        """Feed ``segment``'s warm-up (started by its first batch); at ``warmup_events`` events its baseline is
        built and returned, for :meth:`install`."""
        builder = self._segment_builders.get(segment)
        started = builder is None
        if builder is None:
            builder = self._segment_builders[segment] = self._new_builder(segment=True)
        _feed(builder, batch, held)
        if not builder.ready:
            return WarmUpStep(started, None)
        del self._segment_builders[segment]
        return WarmUpStep(started, builder.build())

    def dump(self, *, segments: bool = True, encoded: bool = False) -> dict[str, Any]:
        """The reference and, unless ``segments`` is False, the per-segment baselines (the pipeline keeps those in a
        file of their own, rewritten only when one changes: :meth:`dump_baselines`). ``encoded``: the reference as
        its JSON text encoded once (:meth:`Reference.encoded`), for the state file."""
        ref = self.reference
        out: dict[str, Any] = {
            "reference": None if ref is None else (ref.encoded() if encoded else ref.to_dict()),
            "segmented": self.segmented,
        }
        if segments:
            out["segments"] = self.dump_baselines()
        return out

    def dump_baselines(self) -> dict[str, Any]:
        """The per-segment baselines as JSON (``{segment: reference dict}``)."""
        return references_to_json(self.segment_references)


def _feed(builder: WarmupReferenceBuilder, batch: SignalBatch, held: dict[str, NDArray[np.str_]] | None) -> None:
    builder.update(
        gamma=batch.gamma,
        flicker=batch.flicker,
        features=batch.features,
        predicted_class=batch.predicted_class,
        confidence=batch.confidence,
        margin=batch.margin,
        held=held,
    )
