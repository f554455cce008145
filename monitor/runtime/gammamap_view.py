"""Wiring for ``/gammamap``: every classifier's Gamma Map (live beside its reference) as JSON, or one as SVG.

``GET /gammamap`` answers ``{"models": {name: {"p_edges", "gamma_edges", "counts", ..., "segments", "reference"}}}``
(see :meth:`monitor.runtime.watch.ModelWatch.gamma_maps`); ``GET /gammamap?format=svg&model=NAME[&segment=S]``
draws the live map beside the reference's with :func:`monitor.gammamap.render_svg` (``model`` may be left out when
one classifier is watched). Regressors have no predicted-class probability and no map.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from monitor.exporters.http import QueryHandler
from monitor.gammamap import render_svg
from monitor.runtime.models import ModelRuntime
from monitor.runtime.watch import ModelWatch

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_SVG = "image/svg+xml"


def _watches(runtimes: Mapping[str, ModelRuntime]) -> dict[str, ModelWatch]:
    return {
        name: rt.watch
        for name, rt in sorted(runtimes.items())
        if rt.watch is not None and rt.model.kind == "classifier"
    }


def gamma_map_handler(runtimes: Mapping[str, ModelRuntime]) -> QueryHandler:
    """The ``/gammamap`` handler over the pipeline's model runtimes (read at each request).

    Returns
    -------
    A function from the query parameters to (status, body, content type): 200 with JSON or SVG; 400 for an unknown
    ``format`` or a missing ``model`` where several classifiers are watched; 404 for an unknown model or segment.
    """

    def handle(params: Mapping[str, str]) -> tuple[int, bytes, str]:
        fmt = params.get("format", "json")
        watches = _watches(runtimes)
        if fmt == "json":
            body = {"models": {name: w.gamma_maps() for name, w in watches.items()}}
            return 200, json.dumps(body, allow_nan=False).encode() + b"\n", _JSON
        if fmt != "svg":
            return 400, f"format '{fmt}' is not one of json, svg; try /gammamap?format=svg\n".encode(), _TEXT
        name = params.get("model")
        if name is None:
            if len(watches) != 1:
                names = ", ".join(watches) or "none"
                return 400, f"?format=svg draws one model; add &model=NAME (classifiers: {names})\n".encode(), _TEXT
            name = next(iter(watches))
        watch = watches.get(name)
        if watch is None:
            names = ", ".join(watches) or "none"
            return 404, f"no classifier named '{name}' is watched (classifiers: {names})\n".encode(), _TEXT
        segment = params.get("segment")
        if segment is not None and segment not in watch.gamma_segments():
            known = ", ".join(watch.gamma_segments()) or "none yet"
            return 404, f"model '{name}' has no Gamma Map for segment '{segment}' (segments: {known})\n".encode(), _TEXT
        live, ref = watch.gamma_map_pair(segment)
        title = f"Gamma Map: {name}" + (f", segment {segment}" if segment is not None else "")
        title += f" (last {watch.config.count_window_events} events per segment)"
        return 200, render_svg(live, ref, title=title).encode(), _SVG

    return handle
