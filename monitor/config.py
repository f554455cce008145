"""Configuration: pydantic models per stage, loaded from YAML, ``HARMONIC_*`` variables and CLI flags.

Precedence: CLI flag > environment > YAML file > default. Unknown keys anywhere are errors that name the key.
Nested environment variables use ``__``: ``HARMONIC_KAFKA__BOOTSTRAP_SERVERS=broker:9092``.

This module is the settings' public home: :class:`Settings` (the whole file) and :func:`load_settings` live here, and
every section and helper is imported from here. The sections are declared beside their kin:

* :mod:`monitor.config_model`: ``models`` (:class:`ModelSettings`) and its ``scoring`` block (:class:`ScoringSettings`);
* :mod:`monitor.config_stream`: ``kafka``, ``sampler``, ``batch``;
* :mod:`monitor.config_watch`: ``segments``, ``windows``, ``drift``, ``alerts``, ``probes``, ``labels``, ``accuracy``,
  ``metrics``, and the offline probe's :class:`FunnelSettings` and :class:`ProbeRunSettings`;
* :mod:`monitor.config_fields`: the sections' strict base and :func:`setting_default` / :func:`setting_description`;
* :mod:`monitor.config_load`: the YAML file, the ``HARMONIC_*`` check, flag merging, the error lines.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from monitor.config_fields import printable_text, setting_default, setting_description, setting_field
from monitor.config_load import (
    NON_SETTING_VARIABLES,
    DictSource,
    check_environment,
    format_validation,
    merge_flags,
    prune,
    read_yaml,
)
from monitor.config_model import ModelSettings, ScoringSettings
from monitor.config_stream import BatchSettings, KafkaSettings, SamplerSettings
from monitor.config_watch import (
    AccuracySettings,
    AlertSettings,
    DriftSettings,
    FunnelSettings,
    LabelSettings,
    MetricsSettings,
    ProbeRunSettings,
    ProbeSettings,
    SegmentSettings,
    WindowSettings,
)
from monitor.errors import ConfigError

__all__ = [
    "NON_SETTING_VARIABLES",
    "AccuracySettings",
    "AlertSettings",
    "BatchSettings",
    "DriftSettings",
    "FunnelSettings",
    "KafkaSettings",
    "LabelSettings",
    "MetricsSettings",
    "ModelSettings",
    "ProbeRunSettings",
    "ProbeSettings",
    "SamplerSettings",
    "ScoringSettings",
    "SegmentSettings",
    "Settings",
    "WindowSettings",
    "load_settings",
    "merge_flags",
    "setting_default",
    "setting_description",
    "setting_field",
]


class Settings(BaseSettings):
    """Everything ``harmonic-monitor run`` needs."""

    model_config = SettingsConfigDict(
        env_prefix="HARMONIC_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
        allow_inf_nan=False,
    )

    _printable_text = field_validator("*")(printable_text)

    models: tuple[ModelSettings, ...] = Field(default=(), description="Models watched by this process.")
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    sampler: SamplerSettings = Field(default_factory=SamplerSettings)
    batch: BatchSettings = Field(default_factory=BatchSettings)
    segments: SegmentSettings = Field(default_factory=SegmentSettings)
    windows: WindowSettings = Field(default_factory=WindowSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    probes: ProbeSettings = Field(default_factory=ProbeSettings)
    labels: LabelSettings = Field(default_factory=LabelSettings)
    accuracy: AccuracySettings = Field(default_factory=AccuracySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    state_dir: Path = Field(Path("state"), description="Where state survives restarts; give each replica its own.")
    checkpoint_seconds: float = Field(
        5.0,
        ge=0,
        description=(
            "How often the state is written (fsynced) and, right after, the offsets it covers are committed: the "
            "most a crash re-reads. 0 checkpoints after every micro-batch (tests; costs an fsync per batch)."
        ),
    )
    max_event_bytes: int = Field(1 << 20, ge=64, description="Larger events are invalid (too_large).")
    shutdown_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="Bound on a graceful SIGTERM exit; keep it below the pod's terminationGracePeriodSeconds.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Least severe level logged.")
    log_format: Literal["plain", "json"] = Field(
        "plain", description="Log lines as plain text or one JSON object each."
    )

    @field_validator("models")
    @classmethod
    def _unique_names(cls, v: tuple[ModelSettings, ...]) -> tuple[ModelSettings, ...]:
        names = [m.name for m in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique; repeated: {sorted(dup)}")
        for m in v:
            if m.compare_with is None:
                continue
            target = next((t for t in v if t.name == m.compare_with), None)
            if target is None:
                raise ValueError(
                    f"model '{m.name}': compare_with names '{m.compare_with}', which is not a configured model "
                    f"({', '.join(names)}); name the model it would replace, or drop compare_with to serve "
                    f"'{m.name}' on its own events"
                )
            if target.name == m.name or target.compare_with is not None:
                raise ValueError(
                    f"model '{m.name}': compare_with must name a served model (one without compare_with); "
                    f"'{target.name}' is {'itself' if target.name == m.name else 'a candidate too'}"
                )
        return v

    @model_validator(mode="after")
    def _needs_a_model(self) -> Settings:
        if not self.models:
            raise ValueError("no model configured: pass --model M.onnx or list `models:` in the config file")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # flags (init) > environment > YAML file (load_settings passes its data in _FILE_DATA) > field defaults
        return (init_settings, env_settings, DictSource(settings_cls, _FILE_DATA.get() or {}))


def load_settings(config_file: str | Path | None = None, flags: dict[str, Any] | None = None) -> Settings:
    """Build :class:`Settings` from an optional YAML file, the environment and flag overrides.

    ``flags`` is a nested dict of values given on the command line (None values are ignored). Environment
    variables override the file; flags override both.
    """
    check_environment(os.environ, Settings.model_fields)
    file_data = read_yaml(Path(config_file)) if config_file else {}
    overrides = prune(flags or {})
    token = _FILE_DATA.set(file_data)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(format_validation(exc)) from exc
    except UnicodeEncodeError as exc:  # a validator quoted a lone surrogate; pydantic cannot carry that message
        raise ConfigError(
            "invalid configuration: a setting holds a lone surrogate (a '\\udXXX' escape in YAML, or a byte that is "
            "not UTF-8 in a HARMONIC_* variable); expected printable UTF-8 text"
        ) from exc
    except SettingsError as exc:  # a HARMONIC_* variable of a list or section setting that is not JSON
        raise ConfigError(
            f"{exc}: a list or section setting given as an environment variable must be JSON, e.g. "
            """HARMONIC_MODELS='[{"name": "credit", "path": "credit.onnx"}]'"""
        ) from exc
    finally:
        _FILE_DATA.reset(token)


#: the YAML file's data while load_settings builds its Settings: the layer under the environment (a context
#: variable: concurrent loads stay apart; a subclass built per call for it cost 2 ms of the 3.5 a load took)
_FILE_DATA: ContextVar[dict[str, Any] | None] = ContextVar("_FILE_DATA", default=None)
