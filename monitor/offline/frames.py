"""pandas, optional: the ``frame`` extra, and what tells a DataFrame apart without importing pandas."""

from __future__ import annotations

import importlib
from typing import Any

from monitor.errors import MonitorError

#: what to install for ``to_frame()`` and parquet files
FRAME_EXTRA = "in the clone, pip install -e '.[frame]' (the `frame` extra: pandas, pyarrow)"


class MissingExtraError(MonitorError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def pandas_module() -> Any:
    """The ``pandas`` module (raises :class:`MissingExtraError` naming the extra without it)."""
    try:
        pd = importlib.import_module("pandas")
    except ImportError:
        raise MissingExtraError(f"this needs pandas, which is not installed: {FRAME_EXTRA}") from None
    return pd


def is_frame(data: object) -> bool:
    """Whether ``data`` is a pandas DataFrame (pandas is not imported to tell)."""
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns") and hasattr(data, "iloc")
