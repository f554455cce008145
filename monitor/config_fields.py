"""What every settings section shares: strict, printable fields, and reading one setting's declaration.

Each section (:mod:`monitor.config_model`, :mod:`monitor.config_stream`, :mod:`monitor.config_watch`) derives from
:class:`StrictSettings`; :func:`setting_default` and :func:`setting_description` let a flag, a keyword or a library
config take a setting's default and meaning from its one declaration.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.fields import FieldInfo

#: what no string setting may hold: control characters (NUL included), U+2028/9 and lone surrogates (an undecodable byte in an
#: environment variable, a "\ud800" escape in YAML): names and versions become metric labels, paths reach the OS
_UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def printable_text(value: Any) -> Any:
    """``value`` when every string in it (dict keys and values, tuple items, paths) is printable UTF-8 text."""
    texts = [value] if isinstance(value, str | Path) else []
    if isinstance(value, tuple | list):
        texts = [v for v in value if isinstance(v, str | Path)]
    elif isinstance(value, dict):
        texts = [t for kv in value.items() for t in kv if isinstance(t, str | Path)]
    for text in texts:
        found = _UNSAFE_TEXT.search(str(text))
        if found:
            raise ValueError(
                f"{str(text)!r} holds {found.group()!r}, a control character or a byte that is not UTF-8; "
                "expected printable UTF-8 text (check the file's encoding and the variable's value)"
            )
    return value


class StrictSettings(BaseModel):
    """A settings section: unknown keys, changes after load, inf and NaN are refused; every string is printable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # inf passes gt=0: refuse it

    _printable_text = field_validator("*")(printable_text)


def setting_field(model: type[BaseModel], name: str) -> FieldInfo:
    """The declaration of setting ``name`` of ``model``: a :class:`KeyError` that names the model's fields when there
    is none (a renamed setting fails where it is read, at import)."""
    try:
        return model.model_fields[name]
    except KeyError:
        raise KeyError(f"{model.__name__} has no setting {name!r}; it has {', '.join(model.model_fields)}") from None


def setting_default(model: type[BaseModel], name: str) -> Any:
    """The default of setting ``name`` of ``model`` (a default factory called): the value a library config, a
    keyword or a flag takes where it stands for this setting, so that the default is written once, here."""
    return setting_field(model, name).get_default(call_default_factory=True, validated_data={})


def setting_description(model: type[BaseModel], name: str) -> str:
    """The description of setting ``name`` of ``model`` (every setting has one)."""
    description = setting_field(model, name).description
    if not description:
        raise KeyError(f"{model.__name__}.{name} has no description")
    return description
