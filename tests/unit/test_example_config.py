"""deploy/monitor.example.yaml is generated from the settings by scripts/gen_example_config.py and must match them.

A setting added to ``monitor.config`` without regenerating the file, or without a description, fails here; so does
a file that no longer loads as valid settings (the compose example mounts it as its configuration).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from monitor.config import ModelSettings, Settings, load_settings
from tests.unit.repo_scripts import REPO, load_script

EXAMPLE = REPO / "deploy" / "monitor.example.yaml"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    """scripts/gen_example_config.py imported as a module (scripts/ is not a package)."""
    return load_script("gen_example_config")


def _keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Every settings key, dotted, recursively; ``models`` items are reached as ``models.0``."""
    for name, info in model.model_fields.items():
        yield prefix + name
        annotation = info.annotation
        if model is Settings and name == "models":
            yield from _keys(ModelSettings, f"{prefix}models.0.")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _keys(annotation, f"{prefix}{name}.")


def _lookup(data: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return False
    return True


def test_example_config_is_up_to_date(gen: ModuleType) -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == gen.render(), (
        "deploy/monitor.example.yaml is out of date with monitor/config.py: "
        "run .venv/bin/python scripts/gen_example_config.py"
    )


def test_check_flag_reports_a_stale_file(gen: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "monitor.example.yaml"
    stale.write_text("kafka: {}\n", encoding="utf-8")
    monkeypatch.setattr(gen, "OUTPUT", stale)
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0


def test_every_settings_key_is_in_the_example() -> None:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    keys = list(_keys(Settings))
    assert "models.0.scoring.regression_tolerance" in keys and "kafka.client" in keys  # the walk reaches nested keys
    missing = [key for key in keys if not _lookup(data, key)]
    assert not missing, (
        f"deploy/monitor.example.yaml lacks {missing}: run .venv/bin/python scripts/gen_example_config.py"
    )


def test_every_setting_has_a_description(gen: ModuleType) -> None:
    def walk(model: type[BaseModel], prefix: str) -> Iterator[str]:
        for name, info in model.model_fields.items():
            inner = gen._model_of(info.annotation)
            if inner is not None:
                yield from walk(inner, f"{prefix}{name}.")
            elif not info.description:
                yield prefix + name

    assert not list(walk(Settings, "")), "add description=... to these settings' Field in monitor/config*.py"


def test_example_loads_as_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.upper().startswith("HARMONIC_")]:
        monkeypatch.delenv(name)
    settings = load_settings(EXAMPLE)
    assert settings.models[0].name == "credit"
    assert settings.kafka.bootstrap_servers == "kafka:9092"  # the compose example's broker
    assert settings.metrics.port == 9108
