"""The pipeline's positions and checkpoints: what it has consumed, applied and committed per partition, and a
checkpoint that saves the state durably and then commits exactly the positions that state holds (a commit never
runs ahead of the state; docs/DESIGN.md, at least once)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from monitor import telemetry as tel
from monitor.config import Settings
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.runtime.saved_positions import SavedPositions, Tail
from monitor.runtime.state import StateStore
from monitor.source.base import Positions, Source

#: its lines are the pipeline's (operators filter on the logger name)
log = logging.getLogger("monitor.runtime.pipeline")


class Checkpoints:
    """Positions per partition, and when and how they are checkpointed.

    Parameters
    ----------
    settings : ``checkpoint_seconds`` (read at each check).
    source : where the positions are committed.
    store : the state file.
    state : the counters saved with the positions, and the ``state_dir`` degraded series.
    saved : the positions, last commits and fingerprints held from the saved state.
    clock : seconds.
    """

    def __init__(
        self,
        settings: Settings,
        source: Source,
        store: StateStore,
        state: MetricsState,
        saved: SavedPositions,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.source = source
        self.store = store
        self.state = state
        self.saved = saved
        self.clock = clock
        #: positions of records whose events are pending or applied (or dead-lettered)
        self.consumed: Positions = {}
        #: positions whose events are all applied: what the next checkpoint saves and then commits
        self.applied: Positions = {}
        self.committed: Positions = {}
        #: per partition, the fingerprint of the last record processed (offset, timestamp in ms or None, CRC-32 of the
        #: value): saved with the position after it, so that a restart can tell the record now at that offset from
        #: the one applied there (a re-created topic already grown past the saved position)
        self.tails: dict[tuple[str, int], Tail] = {}
        self.last = clock()
        self.requested = False
        self._degraded_log = RateLimitedLogger(log, interval_seconds=60.0)

    def restore(self) -> dict[str, dict[str, Any]]:
        """Load the saved counters and positions; returns the saved per-model parts (applied once the models'
        watches exist)."""
        data = self.store.load()
        self.state.load_counters(data.get("counters", []))
        self.saved.restore(data)
        if data:
            log.info("state restored", extra={"path": str(self.store.path)})
        models: dict[str, dict[str, Any]] = data.get("models", {})
        return models

    def save(self, models: Mapping[str, Any]) -> bool:
        """Write the state durably (the counters, ``models``' parts, the applied positions); False when the state
        directory cannot take it."""
        positions = self.saved.rows(self.applied, self.committed, self.tails)
        ok = self.store.save({"counters": self.state.dump_counters(), "models": dict(models), **positions})
        tel.DEGRADED.set(self.state, tel.Reason("state_dir"), 0.0 if ok else 1.0)
        if not ok:
            self._degraded_log.warning("state_dir", "state not saved; offsets not committed", error=self.store.degraded)
        return ok

    def request(self) -> None:
        """Checkpoint at the next chance, whatever the interval."""
        self.requested = True

    def due(self, now: float) -> bool:
        interval = self.settings.checkpoint_seconds
        return self.requested or (now - self.last >= interval and bool(self.consumed))

    def checkpoint(self, persist: Callable[[], bool]) -> None:
        """Save the state (``persist``), then commit exactly the positions it holds."""
        self.last = self.clock()
        self.requested = False
        if not persist():
            return
        positions = dict(self.applied)
        if positions and positions != self.committed:
            self.source.commit(positions)
            self.committed = positions

    def forget(self, key: tuple[str, int]) -> None:
        """Nothing read of ``key`` so far counts (a new incarnation of its topic)."""
        self.consumed.pop(key, None)
        self.applied.pop(key, None)

    def hand_back(self, partitions: Sequence[tuple[str, int]], processed: Positions) -> None:
        """``partitions`` revoked: held as handed back (if the commit made does not land, the next delivery skips what
        was ``processed``), and no longer this replica's."""
        for key in partitions:
            self.saved.hand_back(key, self.applied.get(key), processed.get(key))
            self.consumed.pop(key, None)
            self.applied.pop(key, None)
            self.committed.pop(key, None)
