"""The exception tree. Every error the monitor raises on purpose derives from :class:`MonitorError`.

Messages say what is wrong, what was expected, what arrived, and (where one exists) the fix.
"""

from __future__ import annotations


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


class SourceError(MonitorError):
    """An event source (Kafka, replay file) failed."""


class InvalidEventError(SourceError):
    """One event could not be decoded. ``reason`` is a short, bounded label used in metrics."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ProbeError(MonitorError):
    """A threshold probe was given parameters or data it cannot work with."""
