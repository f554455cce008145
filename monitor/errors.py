"""The exception tree. Every error the monitor raises on purpose derives from :class:`MonitorError`.

Messages say what is wrong, what was expected, what arrived, and (where one exists) the fix.
"""

from __future__ import annotations

from collections.abc import Sequence


def names_listed(names: Sequence[str], limit: int = 5) -> str:
    """How messages list names: the first ``limit`` quoted, then how many more there are."""
    shown = ", ".join(f"'{n}'" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


class MonitorError(Exception):
    """Base of every deliberate harmonic-monitor error."""


class ConfigError(MonitorError):
    """A setting is missing, unknown or out of range."""


class DataError(MonitorError):
    """A data file (reference, points to score) is missing or malformed."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ModelError(MonitorError):
    """The ONNX model cannot be loaded, has an unsupported signature, or got input of the wrong shape."""


class SignatureError(ModelError):
    """An event or file that does not fit the model's inputs; ``reason`` is the invalid-event reason, ``inputs``
    the inputs whose values were at fault with their problem (``missing``, ``not_finite``, ``out_of_range``)."""

    def __init__(self, reason: str, message: str, inputs: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.reason = reason
        self.inputs = inputs


class SourceError(MonitorError):
    """An event source (Kafka, replay file) failed."""


#: what is wrong with one input's value in an event, for ``harmonic_input_invalid_total``: absent (or JSON null),
#: NaN/inf, or a finite number beyond float32's range
INPUT_PROBLEMS = ("missing", "not_finite", "out_of_range")


class InvalidEventError(SourceError):
    """One event could not be decoded. ``reason`` is a short, bounded label used in metrics.

    ``model`` is the model the event named, once the decoder knew it (None before); ``inputs`` names the inputs
    whose values were at fault, each with its problem (one of :data:`INPUT_PROBLEMS`), when the fault lies in
    values rather than in the event's shape.
    """

    def __init__(
        self, reason: str, message: str, *, model: str | None = None, inputs: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.model = model
        self.inputs = inputs


class ProbeError(MonitorError):
    """A threshold probe was given parameters or data it cannot work with."""
