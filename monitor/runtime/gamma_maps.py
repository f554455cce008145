"""The Gamma Map a model's watch keeps: per segment, the (P, γ) cells of the last ``count_window_events`` events
that entered the windows, their running totals, and the points Algorithm 2 ran on (probes) with whether their class
flipped. Read by the HTTP thread (``/gammamap``, the report), hence the lock. Bounded like the windows' segments:
past ``max_segments`` a new segment folds into ``other``.

The cells are on the model's γ edges, its reference map's (:func:`monitor.gammamap.model_gamma_edges`); until the
model has a reference, on the fixed grid. When a reference brings other edges (:meth:`SegmentGammaMaps.set_edges`)
the windows re-bin the events they hold, the running totals restart from them and the probed points start over.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.gammamap import (
    GAMMA_EDGES,
    P_BIN_LABELS,
    GammaMap,
    edges_note,
    empty_map,
    gamma_bin_labels,
    gamma_map,
)
from monitor.gammamap_window import GammaMapWindow
from monitor.rolling.reference import Reference
from monitor.rolling.windows import OTHER, SignalBatch


class SegmentGammaMaps:
    """Per-segment Gamma Map windows, running totals and probed points of one model."""

    def __init__(self, window_events: int, max_segments: int) -> None:
        self.window_events = window_events
        self.max_segments = max_segments
        #: the model's γ edges (its reference map's; the fixed grid until it has one) and their label values
        self.gamma_edges: tuple[float, ...] = GAMMA_EDGES
        self._labels = gamma_bin_labels(GAMMA_EDGES)
        self._maps: dict[str, GammaMapWindow] = {}
        self._lock = threading.Lock()
        #: the points Algorithm 2 ran on (probes), placed by their P and γ, with whether their class flipped
        self._probed: GammaMap | None = None
        #: the same per segment of each point's event (the region exemplar's), bounded and folded like the maps
        self._probed_segments: dict[str, GammaMap] = {}

    def set_edges(self, gamma_edges: Sequence[float]) -> None:
        """Bin on ``gamma_edges`` from now on (the model's reference's): the windows re-bin the events they hold,
        their running totals restart from them, and the probed points (counted on the old edges) start over."""
        edges = tuple(float(e) for e in gamma_edges)
        with self._lock:
            if edges == self.gamma_edges:
                return
            self.gamma_edges, self._labels = edges, gamma_bin_labels(edges)
            for win in self._maps.values():
                win.set_edges(edges)
            self._probed, self._probed_segments = None, {}

    def update(self, drift: SignalBatch) -> dict[tuple[str, str, str], float]:
        """Add the events that enter the windows (uniform inclusion, like the reference) to their segment's map.
        Returns the events added per (segment, p_bin, gamma_bin) label set; regressors (no confidence) add
        nothing."""
        added: dict[tuple[str, str, str], float] = {}
        has_p = np.isfinite(drift.confidence)
        if not has_p.any():
            return added
        with self._lock:
            cols = len(self.gamma_edges) - 1
            for seg in np.unique(drift.segments[has_p]).tolist():
                key = str(seg)
                if key not in self._maps and len(self._maps) >= self.max_segments:
                    key = OTHER  # bounded like the windows' segments
                win = self._maps.get(key)
                if win is None:
                    win = self._maps[key] = GammaMapWindow(self.window_events, self.gamma_edges)
                sel = has_p & (drift.segments == seg)
                win.update(drift.confidence[sel], drift.gamma[sel])
                for cell in np.flatnonzero(win.last_added).tolist():
                    labels = (key, P_BIN_LABELS[cell // cols], self._labels[cell % cols])
                    added[labels] = added.get(labels, 0.0) + float(win.last_added[cell])
        return added

    def add_probed(
        self,
        probability: NDArray[np.float64],
        gamma: NDArray[np.float64],
        unstable: NDArray[np.bool_],
        segments: Sequence[str | None] | None = None,
    ) -> None:
        """Count points that Algorithm 2 ran on (a probe run) into the model's unstable shares per Gamma Map cell;
        ``segments``: each point's segment (its event's; None where unknown), whose map counts it too."""
        ok = np.isfinite(probability) & np.isfinite(gamma)
        if not ok.any():
            return
        edges = self.gamma_edges
        probed = gamma_map(probability[ok], gamma[ok], unstable[ok], gamma_edges=edges)
        by_segment: dict[str, GammaMap] = {}
        if segments is not None:
            if len(segments) != ok.size:
                raise ValueError(f"add_probed needs one segment per point: {len(segments)} for {ok.size} points")
            seg = np.array([OTHER if s is None else s for s in segments], dtype=object)
            known = ok & np.array([s is not None for s in segments], dtype=bool)
            for name in dict.fromkeys(seg[known].tolist()):
                sel = known & (seg == name)
                by_segment[str(name)] = gamma_map(probability[sel], gamma[sel], unstable[sel], gamma_edges=edges)
        with self._lock:
            if edges != self.gamma_edges:
                return  # the edges moved while these were binned: they would not merge
            self._probed = probed if self._probed is None else self._probed.merged(probed)
            for name, part in by_segment.items():
                key = name
                if key not in self._probed_segments and len(self._probed_segments) >= self.max_segments:
                    key = OTHER  # bounded like the maps' segments
                have = self._probed_segments.get(key)
                self._probed_segments[key] = part if have is None else have.merged(part)

    def to_json(self, reference: Reference | None) -> dict[str, Any]:
        """The model's Gamma Map for ``/gammamap``: the live map over the last ``window_events`` events of each
        segment merged (the top-level ``counts``), per segment (``segments``), the running totals (``cumulative``)
        and the reference's map (``reference``; None, with ``reference_note`` saying why, when there is none)."""
        with self._lock:
            edges = self.gamma_edges
            per_segment = {seg: w.window() for seg, w in sorted(self._maps.items())}
            totals = [w.cumulative() for w in self._maps.values()]
            probed = self._probed
            probed_segments = dict(self._probed_segments)
        live = _with_probed(_merge_maps(list(per_segment.values()), edges), probed)  # every segment's, since start
        # each segment's map with the shares of the points whose events were in it
        per_segment = {seg: _with_probed(m, probed_segments.get(seg)) for seg, m in per_segment.items()}
        ref = None if reference is None else reference.gamma_map
        note = None
        if ref is None:
            note = (
                "no reference yet (warming up)"
                if reference is None
                else "the reference holds no Gamma Map (a regressor, or a reference file written before it was kept)"
            )
        return {
            **live.to_json(),
            "window_events": self.window_events,
            "segments": {seg: m.to_json() for seg, m in per_segment.items()},
            "cumulative": _merge_maps(totals, edges).to_json(),
            "reference": None if ref is None else ref.to_json(),
            "reference_note": note,
            "gamma_edges_note": edges_note(
                None if ref is None else ref.gamma_edges, None if ref is None else ref.total
            ),
        }

    def segments(self) -> list[str]:
        """Segments with a Gamma Map, sorted."""
        with self._lock:
            return sorted(self._maps)

    def pair(self, segment: str | None, reference: Reference | None) -> tuple[GammaMap, GammaMap | None]:
        """(live, reference) maps for drawing: one segment's window with the unstable shares of the probed points
        whose events were in that segment, or every segment's merged (``None``) with every probed point's."""
        with self._lock:
            edges = self.gamma_edges
            maps = [w.window() for s, w in self._maps.items() if segment is None or s == segment]
            probed = self._probed if segment is None else self._probed_segments.get(segment)
        ref = None if reference is None else reference.gamma_map
        return _with_probed(_merge_maps(maps, edges), probed), ref


def _merge_maps(maps: Sequence[GammaMap], edges: tuple[float, ...]) -> GammaMap:
    out = empty_map(edges)
    for m in maps:
        out = out.merged(m)
    return out


def _with_probed(live: GammaMap, probed: GammaMap | None) -> GammaMap:
    """``live``'s counts with ``probed``'s unstable shares (the probed points' own cells); unchanged when None."""
    if probed is None:
        return live
    return replace(live, unstable=probed.unstable, probed=probed.probed, unstable_counts=probed.unstable_counts)
