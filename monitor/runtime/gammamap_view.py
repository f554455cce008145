"""Wiring for ``/gammamap``: every classifier's Gamma Map (live beside its reference) as JSON, or one as SVG.

``GET /gammamap`` answers ``{"models": {name: {"p_edges", "gamma_edges", "counts", ..., "segments", "reference"}}}``
(see :meth:`monitor.runtime.watch.ModelWatch.gamma_maps`); ``GET /gammamap?format=svg&model=NAME[&segment=S]``
draws the live map beside the reference's with :func:`monitor.gammamap.render_svg` (``model`` may be left out when
one classifier is watched). Regressors have no predicted-class probability and no map.

The pipeline builds the document (:func:`gamma_map_document`); the HTTP server process answers from the copy the
pipeline hands over with each snapshot (:func:`gamma_map_document_handler`), so a request never reaches into the
pipeline's interpreter. :func:`gamma_map_handler` answers from the runtimes directly (an in-process server).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from monitor.gammamap import GammaMap, render_svg

if TYPE_CHECKING:
    from monitor.exporters.http import QueryHandler
    from monitor.runtime.models import ModelRuntime

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_SVG = "image/svg+xml"


#: why a regressor has no Gamma Map
NO_P_AXIS = "a regressor: the Gamma Map plots γ against the predicted class's probability, and a regressor has none"


def gamma_map_document(runtimes: Mapping[str, ModelRuntime]) -> dict[str, Any]:
    """``{"models": {name: its watch's gamma_maps()}}`` for every classifier with a watch, by name, and
    ``{"not_drawn": {name: why}}`` for every regressor (no P axis) when there is one."""
    doc: dict[str, Any] = {
        "models": {
            name: rt.watch.gamma_maps()
            for name, rt in sorted(runtimes.items())
            if rt.watch is not None and rt.model.kind == "classifier"
        }
    }
    regressors = {name: NO_P_AXIS for name, rt in sorted(runtimes.items()) if rt.model.kind != "classifier"}
    if regressors:
        doc["not_drawn"] = regressors
    return doc


def gamma_map_document_handler(document: Callable[[], Mapping[str, Any] | None]) -> QueryHandler:
    """The ``/gammamap`` handler over the latest document (None: none published yet, an empty map set).

    Returns
    -------
    A function from the query parameters to (status, body, content type): 200 with JSON or SVG; 400 for an unknown
    ``format`` or a missing ``model`` where several classifiers are watched; 404 for an unknown model or segment.
    """

    def handle(params: Mapping[str, str]) -> tuple[int, bytes, str]:
        fmt = params.get("format", "json")
        doc = document() or {"models": {}}
        models: Mapping[str, Any] = doc.get("models", {})
        not_drawn: Mapping[str, str] = doc.get("not_drawn", {})
        if fmt == "json":
            out = {"models": models, **({"not_drawn": not_drawn} if not_drawn else {})}
            return 200, json.dumps(out, allow_nan=False).encode() + b"\n", _JSON
        if fmt != "svg":
            return 400, f"format '{fmt}' is not one of json, svg; try /gammamap?format=svg\n".encode(), _TEXT
        names = ", ".join(models) or "none"
        name = params.get("model")
        if name is None:
            if len(models) != 1:
                return 400, f"?format=svg draws one model; add &model=NAME (classifiers: {names})\n".encode(), _TEXT
            name = next(iter(models))
        entry = models.get(name)
        if entry is None and name in not_drawn:
            return 404, f"no Gamma Map for '{name}': {not_drawn[name]}\n".encode(), _TEXT
        if entry is None:
            return 404, f"no classifier named '{name}' is watched (classifiers: {names})\n".encode(), _TEXT
        segment = params.get("segment")
        segments: Mapping[str, Any] = entry.get("segments", {})
        if segment is not None and segment not in segments:
            known = ", ".join(sorted(segments)) or "none yet"
            return 404, f"model '{name}' has no Gamma Map for segment '{segment}' (segments: {known})\n".encode(), _TEXT
        live = GammaMap.from_json(dict(segments[segment] if segment is not None else entry))
        # a segment against its own baseline where it has one, else the model-wide reference
        own = entry.get("segment_references", {}).get(segment) if segment is not None else None
        base = own if own is not None else entry.get("reference")
        ref = None if base is None else GammaMap.from_json(dict(base))
        title = f"Gamma Map: {name}" + (f", segment {segment}" if segment is not None else "")
        title += f" (last {entry.get('window_events', '?')} events per segment)"
        note = entry.get("gamma_edges_note") or ""
        return 200, render_svg(live, ref, title=title, classes=entry.get("classes"), note=note).encode(), _SVG

    return handle


def gamma_map_handler(runtimes: Mapping[str, ModelRuntime]) -> QueryHandler:
    """The ``/gammamap`` handler over the pipeline's model runtimes, read at each request."""
    return gamma_map_document_handler(lambda: gamma_map_document(runtimes))
