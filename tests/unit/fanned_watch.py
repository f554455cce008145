"""A model's watch whose report is fanned out after every call (monitor/runtime/fanout.py), for tests that drive a
watch without a pipeline: its series land in a MetricsState and its alert transitions in a list, as the pipeline
sends them once a step's batches are applied."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from monitor.alerts import AlertEvent
from monitor.exporters.prometheus import MetricsState
from monitor.runtime.fanout import Fanout
from monitor.runtime.watch import ModelWatch, WatchConfig

#: the watch's methods that add to its report
REPORTING = (
    "update",
    "evaluate",
    "tick",
    "install_reference",
    "install_segment_references",
    "set_reference",
    "set_held_tables",
    "set_accuracy_fit",
    "restore",
)


class FannedWatch(ModelWatch):
    """A :class:`ModelWatch` that sends its report through :attr:`fanout` when each of its reporting methods
    returns (or raises)."""

    def __init__(
        self, model: str, config: WatchConfig, state: MetricsState, alerts: list[AlertEvent] | None, **kwargs: Any
    ) -> None:
        super().__init__(model, config, **kwargs)
        self.fanout = Fanout(state, None if alerts is None else alerts.append)
        self._calls = 0  # reporting methods under way: the outermost one sends
        self.fanout.send(self.take_report())  # the model's series registered, as the pipeline does at start


def _fanned(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: FannedWatch, *args: Any, **kwargs: Any) -> Any:
        self._calls += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._calls -= 1
            if self._calls == 0:
                self.fanout.send(self.take_report())

    return call


for _name in REPORTING:
    setattr(FannedWatch, _name, _fanned(getattr(ModelWatch, _name)))


def fanned_watch(
    model: str, config: WatchConfig, state: MetricsState, *, alerts: list[AlertEvent] | None = None, **kwargs: Any
) -> FannedWatch:
    """A watch (``kwargs``: :class:`ModelWatch`'s keyword arguments) whose series go to ``state`` and alert
    transitions to ``alerts`` after every call."""
    return FannedWatch(model, config, state, alerts, **kwargs)
