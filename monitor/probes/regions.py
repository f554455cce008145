"""Probes: the bounded index of flagged feature regions.

A *region* is a place in feature space where sampled events show high γ or flicker: a centre (standardized
units), a radius, the exemplars that put it there (raw units, bounded), and its scores. Events are flagged when
γ exceeds a threshold (the reference's upper quantile) or any flicker copy flipped. A flagged event joins the
nearest region whose centre is within ``radius``; otherwise it opens a new one, evicting the region with the
lowest rank when the index is full. Memory: ``max_regions × max_exemplars × n`` floats.

Regions are formed within a segment: a flagged event joins only a region of its own event's segment, so one
region never mixes segments (cities) and what a probe finds in it belongs to that segment. Regions are ranked by
what moved: first their segment's *severity* (:attr:`RegionIndex.severity`, set by the caller from the segment's
drift verdict and evidence; 0 for a segment that did not move), then their decayed score (γ + flicker). A full index
evicts by rank: the new region takes the slot of the lowest-ranked region, unless every region outranks the new
event's segment — then the event is not kept (``refused_total``), so the regions of a segment that moved are never
pushed out by events of one that did not.

For a model that holds values fixed (int, bool and string inputs: :mod:`monitor.model.signature`) each exemplar
keeps its event's held values beside its raw row (:meth:`Region.held`), so that a probe evaluates every exemplar with
its own; regions are still found in x alone (the held values do not move a centre). Each exemplar also keeps its
event's segment (:meth:`Region.segments`: all the region's own), so that what a probe finds at an exemplar is
counted in that segment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from monitor.config import ProbeSettings, setting_default
from monitor.errors import ConfigError
from monitor.model.signature import Held


@dataclass
class Region:
    """One flagged region. ``centre`` is in standardized units; ``exemplars`` are raw rows."""

    region_id: str
    centre: NDArray[np.float64]
    radius: float
    exemplars: NDArray[np.float64]
    events: int = 0
    gamma_sum: float = 0.0
    gamma_max: float = 0.0
    flicker_sum: float = 0.0
    score: float = 0.0  # exponentially decayed sum of γ + flicker, for ranking and eviction
    first_seen: float = 0.0
    last_seen: float = 0.0
    probed_at: float | None = None
    #: the segment of the events that formed it (None: the events' segments were not given)
    segment: str | None = None
    #: ``events`` when it was last probed: a region with no event since has nothing new to probe
    probed_events: int = 0
    _filled: int = field(default=0, repr=False)
    #: the exemplars' held values by key, ``(max_exemplars, …)`` each, in the exemplars' slots (None: none held)
    held_exemplars: dict[str, NDArray[Any]] | None = field(default=None, repr=False)
    #: the exemplars' segments in the exemplars' slots (None: the event's segment was not given)
    exemplar_segments: list[str | None] = field(default_factory=list, repr=False)

    @property
    def gamma_mean(self) -> float:
        return self.gamma_sum / self.events if self.events else 0.0

    @property
    def flicker_mean(self) -> float:
        return self.flicker_sum / self.events if self.events else 0.0

    def points(self) -> NDArray[np.float64]:
        return self.exemplars[: self._filled]

    def held(self) -> Held | None:
        """The held values of :meth:`points`, row for row (None when the model holds nothing)."""
        if self.held_exemplars is None:
            return None
        return Held({k: v[: self._filled] for k, v in self.held_exemplars.items()})

    def segments(self) -> list[str | None]:
        """The segments of :meth:`points`' events, row for row (None where it was not given)."""
        return (self.exemplar_segments + [None] * self._filled)[: self._filled]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.region_id,
            "segment": self.segment,
            "centre_standardized": self.centre.tolist(),
            "radius": self.radius,
            "events": self.events,
            "gamma_mean": self.gamma_mean,
            "gamma_max": self.gamma_max,
            "flicker_mean": self.flicker_mean,
            "score": self.score,
            "exemplars": int(self._filled),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "probed_at": self.probed_at,
        }


class RegionIndex:
    """Bounded index of flagged regions for one model.

    Parameters
    ----------
    n_features : feature count n.
    max_regions : bound on regions kept (the lowest-scoring one is evicted).
    radius : join radius in standardized units (default √n · 0.5: half a standard deviation per axis).
    max_exemplars : raw rows kept per region (a ring: newest replace oldest).
    half_life_seconds : decay of the region score.
    """

    def __init__(
        self,
        n_features: int,
        *,
        max_regions: int = setting_default(ProbeSettings, "max_regions"),
        radius: float | None = None,
        max_exemplars: int = 16,
        half_life_seconds: float = 3600.0,
    ) -> None:
        if n_features < 1 or max_regions < 1 or max_exemplars < 1:
            raise ConfigError(
                f"n_features, max_regions and max_exemplars must be >= 1; got {n_features}, {max_regions}, {max_exemplars}"
            )
        if radius is not None and not radius > 0:
            raise ConfigError(f"region radius must be > 0; got {radius}")
        if not half_life_seconds > 0:
            raise ConfigError(f"half_life_seconds must be > 0; got {half_life_seconds}")
        self.n_features = n_features
        self.max_regions = max_regions
        self.radius = radius if radius is not None else 0.5 * float(np.sqrt(n_features))
        self.max_exemplars = max_exemplars
        self.half_life_seconds = half_life_seconds
        self.reset()

    def reset(self) -> None:
        self._regions: list[Region] = []
        #: segment → its severity (larger: it moved more), compared as tuples; a segment not named has ``()``
        self.severity: Mapping[str | None, tuple[float, ...]] = {}
        # row k = self._regions[k].centre, kept in one array so the nearest-centre search is one vector op per row
        self._centres = np.zeros((self.max_regions, self.n_features))
        self._next_id = 0
        self._last_decay: float | None = None
        self.flagged_total = 0
        self.evicted_total = 0
        #: flagged events not kept: the index was full of regions that outrank their segment
        self.refused_total = 0

    @property
    def regions(self) -> tuple[Region, ...]:
        return tuple(self._regions)

    def __len__(self) -> int:
        return len(self._regions)

    def _decay(self, now: float) -> None:
        if self._last_decay is not None and now > self._last_decay:
            factor = 0.5 ** ((now - self._last_decay) / self.half_life_seconds)
            for r in self._regions:
                r.score *= factor
        self._last_decay = now if self._last_decay is None else max(now, self._last_decay)

    def update(
        self,
        standardized: NDArray[np.float64],
        raw: NDArray[np.float64],
        gamma: NDArray[np.float64],
        flicker: NDArray[np.float64],
        flagged: NDArray[np.bool_],
        now: float,
        held: Held | None = None,
        segments: Sequence[str] | None = None,
    ) -> Self:
        """Add the flagged rows of a scored batch (all arrays have B rows; ``flagged`` selects); ``held``: the
        batch's held values (B rows), kept with the exemplars; ``segments``: the B events' segments, kept likewise."""
        if segments is not None and len(segments) != raw.shape[0]:
            raise ValueError(f"RegionIndex.update needs one segment per row: {len(segments)} for {raw.shape[0]} rows")
        idx = np.flatnonzero(flagged)
        if idx.size == 0:
            return self
        self._decay(now)
        g = np.nan_to_num(gamma, nan=0.0)
        f = np.nan_to_num(flicker, nan=0.0)
        for i in idx:
            self.flagged_total += 1
            z = standardized[i]
            segment = None if segments is None else str(segments[int(i)])
            k = self._nearest(z, segment)
            if k is None:
                k = self._open(z, now, segment)
                if k is None:
                    self.refused_total += 1
                    continue
            region = self._regions[k]
            region.events += 1
            region.centre += (z - region.centre) / region.events
            self._centres[k] = region.centre
            region.gamma_sum += g[i]
            region.gamma_max = max(region.gamma_max, float(g[i]))
            region.flicker_sum += f[i]
            region.score += float(g[i] + f[i])
            region.last_seen = now
            slot = (region.events - 1) % self.max_exemplars
            region.exemplars[slot] = raw[i]
            if len(region.exemplar_segments) < self.max_exemplars:
                region.exemplar_segments.extend([None] * (self.max_exemplars - len(region.exemplar_segments)))
            region.exemplar_segments[slot] = segment
            if held is not None and held.values:
                if region.held_exemplars is None or set(region.held_exemplars) != set(held.values):
                    region.held_exemplars = _held_slots(held, self.max_exemplars)
                for key, values in held.values.items():
                    region.held_exemplars[key][slot] = values[i]
            region._filled = min(region._filled + 1, self.max_exemplars)
        return self

    def _nearest(self, z: NDArray[np.float64], segment: str | None) -> int | None:
        """Slot of the nearest region of ``segment`` whose centre is within ``radius`` of ``z``, else None."""
        slots = [k for k, r in enumerate(self._regions) if r.segment == segment]
        if not slots:
            return None
        diff = self._centres[slots] - z
        d2 = np.einsum("ij,ij->i", diff, diff)
        j = int(np.argmin(d2))
        return slots[j] if d2[j] <= self.radius**2 else None

    def _open(self, z: NDArray[np.float64], now: float, segment: str | None) -> int | None:
        """Open a region of ``segment`` at ``z``; when the index is full it takes the slot of the lowest-ranked one,
        unless that one's segment outranks ``segment`` (then None: not opened)."""
        if len(self._regions) >= self.max_regions:
            slot = min(range(len(self._regions)), key=lambda k: self.rank(self._regions[k]))
            if self.severity_of(self._regions[slot].segment) > self.severity_of(segment):
                return None
        region = Region(
            region_id=f"r{self._next_id}",
            centre=z.astype(np.float64).copy(),
            radius=self.radius,
            exemplars=np.zeros((self.max_exemplars, self.n_features)),
            first_seen=now,
            last_seen=now,
            segment=segment,
        )
        self._next_id += 1
        if len(self._regions) >= self.max_regions:
            self._regions[slot] = region
            self.evicted_total += 1
        else:
            slot = len(self._regions)
            self._regions.append(region)
        self._centres[slot] = region.centre
        return slot

    def severity_of(self, segment: str | None) -> tuple[float, ...]:
        """How much ``segment`` moved (:attr:`severity`; ``()`` when not named: below any named one)."""
        return tuple(self.severity.get(segment, ()))

    def rank(self, region: Region) -> tuple[tuple[float, ...], float]:
        """The region's rank: its segment's severity, then its decayed score (larger ranks higher)."""
        return self.severity_of(region.segment), region.score

    def worst(self, k: int) -> list[Region]:
        """The ``k`` highest-ranked regions (:meth:`rank`), highest first."""
        return sorted(self._regions, key=self.rank, reverse=True)[:k]


def _held_slots(held: Held, size: int) -> dict[str, NDArray[Any]]:
    """Empty exemplar slots for ``held``'s keys: ``(size, …)`` each, strings as objects (no fixed width)."""
    slots: dict[str, NDArray[Any]] = {}
    for key, v in held.values.items():
        shape = (size, *v.shape[1:])
        slots[key] = np.full(shape, "", dtype=object) if v.dtype.kind in "OUS" else np.zeros(shape, dtype=v.dtype)
    return slots
