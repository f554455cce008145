"""Package namespaces whose public names load on first use (PEP 562): what the packages' ``__init__`` share.

A package lists the names other packages import from it (``__all__``) with the module each comes from; importing the
package imports none of its modules, and ``from monitor.source import KafkaSource`` loads ``monitor.source.kafka``
then. A name spelled as its module (``listen.listen``) cannot be listed: importing the module sets the package's
attribute of that name to the module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: each name of ``homes`` is read from its module
    (``package.homes[name]``) at its first use and kept in ``namespace`` (the package's globals).

    >>> getattr_, dir_ = lazy_names("monitor", {"InferenceEvent": "events"}, {})
    >>> getattr_("InferenceEvent").__name__, dir_()
    ('InferenceEvent', ['InferenceEvent'])
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
