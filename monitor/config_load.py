"""The layers under :class:`monitor.config.Settings`: the YAML file read, ``HARMONIC_*`` variables checked, flags
pruned and merged, and pydantic's errors turned into one line per problem."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from monitor.errors import ConfigError
from monitor.logs import is_secret_name, redact, redact_text


def read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file '{path}' does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file '{path}' is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    # ValueError: a value YAML's resolver takes for a date but is none (2026-13-45); RecursionError: deep nesting
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigError(f"config file '{path}' is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{path}' must be a mapping at the top level; got {type(data).__name__}")
    odd = [key for key in data if not isinstance(key, str)]
    if odd:
        raise ConfigError(f"config file '{path}' has top-level key {odd[0]!r}; expected setting names such as 'models'")
    return data


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def format_validation(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key '{loc}' (check spelling; see `harmonic-monitor check-config --help`)")
        elif err["type"] == "value_error":
            # our validators' messages already name the value; drop pydantic's "Value error, " prefix
            lines.append(f"'{loc}': {err.get('ctx', {}).get('error', err['msg'])}")
        else:
            got = err.get("input")
            secret = next((str(part) for part in err["loc"] if is_secret_name(str(part))), "")
            shown = "" if isinstance(got, dict | list) else f"; got {redact(got, secret)!r}"
            lines.append(f"'{loc}': {err['msg']}{shown}")
    # one problem: one line; several: one line each under the heading. No secret in an error message
    joined = lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines)
    return redact_text("invalid configuration: " + joined)


#: HARMONIC_* variables that are read outside the settings model
NON_SETTING_VARIABLES = frozenset({"HARMONIC_MALLOC_TUNING", "HARMONIC_GC_TUNING"})


def check_environment(environ: Mapping[str, str], sections: Collection[str]) -> None:
    """Refuse a ``HARMONIC_*`` variable that names none of the top-level ``sections`` (pydantic-settings would
    silently ignore it).

    The classic slip is a single underscore where a nested key needs two: ``HARMONIC_KAFKA_BOOTSTRAP_SERVERS``
    is ignored and the sidecar connects to the default broker. Unknown keys *inside* a section
    (``HARMONIC_KAFKA__TOPICC``) are caught by the model's ``extra="forbid"``.
    """
    for key in sorted(environ):
        if not key.upper().startswith("HARMONIC_") or key.upper() in NON_SETTING_VARIABLES:
            continue
        top = key[len("HARMONIC_") :].lower().split("__", 1)[0]
        if top in sections:
            continue
        hint = ""
        for section in sorted(sections, key=len, reverse=True):
            if top.startswith(section + "_"):
                nested = key[: len("HARMONIC_") + len(section)] + "__" + key[len("HARMONIC_") + len(section) + 1 :]
                hint = f"; nested keys take a double underscore: {nested.upper()}"
                break
        raise ConfigError(
            f"unknown environment variable '{key}': there is no setting '{top}'{hint} "
            f"(top-level settings: {', '.join(sorted(sections))})"
        )


class DictSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def prune(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            sub = prune(v)
            if sub:
                out[k] = sub
        elif v is not None:
            out[k] = v
    return out


def merge_flags(base: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge flag overrides into a nested dict (exposed for tests)."""
    return _deep_merge(base, prune(flags))
