"""Each model's watch, built from the settings and from what the state directory kept of it.

A watch (:class:`~monitor.runtime.watch.ModelWatch`) is restored from the model's part of the state file when that
part fits the model (else rebuilt, logged); its per-segment baselines come from their own file
(:func:`~monitor.runtime.state.load_baselines`) when they were computed with this model, reference and scoring
settings; a model whose watch has no reference yet takes it from the reference file (a JSON reference carries
per-segment baselines too). :class:`SegmentBaselineFiles` writes a model's baselines again whenever they changed.
A watch writes nothing itself: what it produces goes out through the pipeline's :class:`~monitor.runtime.fanout.Fanout`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from monitor.config import Settings
from monitor.drift.categories import held_element_names
from monitor.errors import DataError, MonitorError
from monitor.rolling.reference_file import read_reference, read_segment_references
from monitor.rolling.segment_baselines import references_from_json
from monitor.runtime.models import ModelRuntime
from monitor.runtime.state import load_baselines, restore_model, save_baselines
from monitor.runtime.watch import ModelWatch, WatchConfig

log = logging.getLogger("monitor.runtime.pipeline")


def new_watch(settings: Settings, rt: ModelRuntime) -> ModelWatch:
    """A fresh watch for ``rt``: its feature and held-input names decided at load, its labelled accuracy fit."""
    watch = ModelWatch(
        rt.name,
        WatchConfig.from_settings(settings, rt.settings.warmup_events),
        feature_names=rt.model.feature_names,  # the names decided at load (settings' feature_names or the signature's)
    )
    watch.held_names = held_element_names(rt.model.signature)  # the held inputs' category tests, by name
    watch.classifier = rt.model.kind == "classifier"
    watch.set_accuracy_fit(rt.accuracy_fit)  # None: the reference holds no labelled fit
    return watch


def install_watches(
    settings: Settings,
    runtimes: Iterable[ModelRuntime],
    saved: dict[str, dict[str, Any]],
    baselines: SegmentBaselineFiles,
    reference_from_file: Callable[[ModelRuntime], None],
) -> None:
    """Give every model its watch (:func:`install_watch`) and its saved per-segment baselines; a model whose watch
    has no reference yet takes it from its reference file (JSON here, rows scored by ``reference_from_file``). The
    detectors of every baseline are calibrated here, before the first poll takes records into flight."""
    for rt in runtimes:
        install_watch(settings, rt, saved.get(rt.name, {}))
        assert rt.watch is not None
        baselines.restore(rt)
        ref_path = rt.settings.reference
        if rt.standardizer is not None and not rt.watch.has_reference and ref_path is not None:
            if ref_path.suffix.lower() == ".json":
                reference_from_json(rt, ref_path)
            else:
                reference_from_file(rt)
        rt.watch.verdicts.calibrate()


def install_watch(settings: Settings, rt: ModelRuntime, saved: dict[str, Any]) -> None:
    """Give ``rt`` its watch, restored from ``saved`` (the model's part of the state file) where that fits."""
    rt.watch = new_watch(settings, rt)
    try:
        restore_model(rt, saved)
    except (MonitorError, KeyError, TypeError, ValueError) as exc:
        # e.g. the model's feature count changed since the state was written: rebuild, do not crash-loop
        log.warning("saved state does not fit the model; ignoring it", extra={"model": rt.name, "error": str(exc)})
        rt.watch = new_watch(settings, rt)


def reference_from_json(rt: ModelRuntime, path: Path) -> None:
    """Install a JSON reference file's overall and per-segment baselines into ``rt``'s watch."""
    assert rt.watch is not None
    rt.watch.install_segment_references(read_segment_references(path, rt.model.n_features))
    rt.watch.install_reference(read_reference(path, rt.model.n_features)[1])


class SegmentBaselineFiles:
    """The per-segment baselines of each model in their own file of the state directory, written when they change."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        #: per model, the baselines_version of its watch last written (or restored)
        self._saved: dict[str, int] = {}

    def restore(self, rt: ModelRuntime) -> None:
        """Re-install a model's saved per-segment baselines (when they were computed with this model, reference and
        scoring settings)."""
        assert rt.watch is not None
        saved = load_baselines(self.dir, rt.name, rt.fingerprint())
        if saved:
            try:
                refs = references_from_json(saved)
                if any(ref.n_features != rt.model.n_features for ref in refs.values()):
                    raise DataError("saved segment baselines have another feature count")
            except MonitorError as exc:
                log.warning("saved segment baselines do not fit the model; ignoring them", extra={"error": str(exc)})
                return
            rt.watch.install_segment_references(refs)
            log.info("segment baselines restored from state", extra={"model": rt.name, "segments": sorted(refs)})
        self._saved[rt.name] = rt.watch.baselines_version

    def save_changed(self, runtimes: Iterable[ModelRuntime]) -> None:
        """Write the baselines of every model whose baselines changed since they were last written."""
        for rt in runtimes:
            watch = rt.watch
            if (
                watch is not None
                and self._saved.get(rt.name) != watch.baselines_version
                and save_baselines(self.dir, rt.name, rt.fingerprint(), watch.dump_baselines())
            ):
                self._saved[rt.name] = watch.baselines_version
