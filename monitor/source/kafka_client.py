"""The kafka-python consumer as the sources make it: its construction, and its calls' bounds (used by
:mod:`monitor.source.kafka`'s group consumer and :mod:`monitor.source.side_read`'s reader beside it)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any


def new_consumer(config: Mapping[str, Any]) -> Any:
    """A ``KafkaConsumer``; one whose construction fails (a cluster not reached in ``bootstrap_timeout_ms``) closes
    the network client it had started first, so that attempt after attempt leaves no I/O thread behind."""
    from kafka import KafkaConsumer

    class Consumer(KafkaConsumer):  # type: ignore[misc]
        def __init__(self, **kw: Any) -> None:
            try:
                super().__init__(**kw)
            except BaseException:
                client = getattr(self, "_client", None)
                if client is not None:
                    with contextlib.suppress(Exception):
                        client.close()
                raise

    return Consumer(**config)


def timeout_kwargs(method: Callable[..., Any], timeout_ms: int) -> dict[str, int]:
    """``{"timeout_ms": timeout_ms}`` where ``method`` takes it (recent kafka-python), else nothing."""
    return {"timeout_ms": timeout_ms} if "timeout_ms" in inspect.signature(method).parameters else {}
