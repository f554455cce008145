"""Command-line flags generated from the settings (:mod:`monitor.config`): one declaration of each default and meaning.

:func:`add_setting_flag` adds the flag that stands for one setting: its type, choices (a ``Literal``), default and help
(the field's description) are read from the pydantic field. A command whose default differs from the setting's on
purpose says so where it declares the flag (``default=`` with ``why=``), and the help shows the reason. A flag that
overrides the settings (``run``'s ``--topic``) has no default of its own (``override=True``): unset, the
environment, the file and the setting's default decide.

Every flag made here is recorded in :data:`MADE`; tests/unit/test_settings_once.py checks that every flag standing
for a setting was made here, so that no default or description is written a second time as an argparse literal.
"""

from __future__ import annotations

import argparse
import types
import typing
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from monitor.config import setting_default, setting_description, setting_field


@dataclass(frozen=True)
class SettingFlag:
    """What :func:`add_setting_flag` made a flag from: the settings model and field, and the reason its default
    differs from the setting's (None where it is the setting's, or where the flag overrides the settings)."""

    model: type[BaseModel]
    name: str
    why: str | None
    override: bool


#: every flag :func:`add_setting_flag` made, with the setting it stands for
MADE: weakref.WeakKeyDictionary[argparse.Action, SettingFlag] = weakref.WeakKeyDictionary()

_UNSET: Any = object()


def _plain_type(annotation: Any) -> Any:
    """``annotation`` without ``None`` in a union (``float | None`` → ``float``)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def flag_text(value: Any) -> Any:
    """A setting's value as its flag spells it: a sequence as comma-separated text (``("cpu",)`` → ``"cpu"``)."""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return value


def add_setting_flag(
    parser: argparse._ActionsContainer,
    model: type[BaseModel],
    name: str,
    flag: str,
    *,
    default: Any = _UNSET,
    why: str | None = None,
    override: bool = False,
    type: Callable[[str], Any] | None = _UNSET,  # noqa: A002 (argparse's word)
    choices: Sequence[str] | None = None,
    before: str = "",
    after: str = "",
    help: str | None = None,  # noqa: A002
    dest: str | None = None,
    metavar: str | None = None,
) -> argparse.Action:
    """Add ``flag`` for setting ``name`` of ``model`` to ``parser``; the action added.

    type: ``int``/``float`` from the field's annotation (``type=`` for a stricter parser, e.g. ``count_at_least``);
    choices: a ``Literal``'s values (``choices=`` for a command that spells them otherwise); a ``bool`` setting whose
    default is false is a switch (``store_true``); a sequence's default is comma-separated text.
    default: the setting's, unless the command's differs on purpose: then ``why`` must say why. ``override``: no
    default (None): the flag wins over the settings only when given.
    help: ``before`` + the field's description + ``after``, then the default (``help=`` replaces the description
    where a command's flag means more than the setting, e.g. the demo's seed seeds its data too).
    """
    field = setting_field(model, name)
    if (default is not _UNSET) != (why is not None):
        raise ValueError(f"{flag}: a default of the command's own needs the reason it differs from {name}'s (why=)")
    if override and default is not _UNSET:
        raise ValueError(f"{flag}: an override flag has no default of its own")
    annotation = _plain_type(field.annotation)
    kwargs: dict[str, Any] = {}
    if typing.get_origin(annotation) is Literal:
        kwargs["choices"] = list(typing.get_args(annotation))
    if choices is not None:
        kwargs["choices"] = list(choices)
    setting = setting_default(model, name)
    value = None if override else flag_text(setting if default is _UNSET else default)
    text = (help if help is not None else setting_description(model, name)).replace("%", "%%")
    if override:
        known = setting is not PydanticUndefined and setting not in (None, "")
        shown = f" (default: the settings', else {flag_text(setting)})" if known else ""
    elif why is not None:
        shown = f" (default here {value}: {why})"
    else:
        shown = f" (default {value})" if value not in ("", None) else " (default: none)"
    kwargs["help"] = f"{before}{text}{after}{shown}"
    if dest is not None:
        kwargs["dest"] = dest
    if annotation is bool and setting is False and not override:
        action = parser.add_argument(flag, action="store_true", **kwargs)
    else:
        if type is _UNSET:
            type = annotation if annotation in (int, float) else None
        if type is not None:
            kwargs["type"] = type
        if metavar is not None:
            kwargs["metavar"] = metavar
        action = parser.add_argument(flag, default=value, **kwargs)
    MADE[action] = SettingFlag(model, name, why, override)
    return action
