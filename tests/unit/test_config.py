"""Configuration loading: precedence flag > HARMONIC_* env > YAML file > default, and errors that name the key."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from monitor.config import KafkaSettings, Settings, load_settings, merge_flags
from monitor.errors import ConfigError

ONE_MODEL = "models:\n  - name: m\n    path: m.onnx\n"


@pytest.fixture(autouse=True)
def _no_inherited_harmonic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own HARMONIC_* variables must not leak into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("HARMONIC_"):
            monkeypatch.delenv(name)


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "monitor.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(frozen=True)
class Key:
    """One setting seen through every layer: its env variable, flag dict, YAML snippet and a value per layer."""

    env_name: str
    flags: Callable[[str], dict[str, Any]]
    read: Callable[[Settings], str]
    yaml: str
    default: str
    file_value: str
    env_value: str
    flag_value: str


NESTED = Key(
    env_name="HARMONIC_KAFKA__TOPIC",
    flags=lambda v: {"kafka": {"topic": v}},
    read=lambda s: s.kafka.topic,
    yaml="kafka:\n  topic: from-file\n",
    default="inference-events",
    file_value="from-file",
    env_value="from-env",
    flag_value="from-flag",
)
TOP_LEVEL = Key(
    env_name="HARMONIC_LOG_LEVEL",
    flags=lambda v: {"log_level": v},
    read=lambda s: s.log_level,
    yaml="log_level: warning\n",
    default="info",
    file_value="warning",
    env_value="error",
    flag_value="debug",
)
KEYS = pytest.mark.parametrize("key", [NESTED, TOP_LEVEL], ids=["nested", "top-level"])


@KEYS
def test_load_settings_uses_the_default_without_file_env_or_flag(tmp_path: Path, key: Key) -> None:
    assert key.read(load_settings(write_yaml(tmp_path, ONE_MODEL))) == key.default


@KEYS
def test_load_settings_file_beats_default(tmp_path: Path, key: Key) -> None:
    assert key.read(load_settings(write_yaml(tmp_path, ONE_MODEL + key.yaml))) == key.file_value


@KEYS
def test_load_settings_env_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: Key) -> None:
    monkeypatch.setenv(key.env_name, key.env_value)
    assert key.read(load_settings(write_yaml(tmp_path, ONE_MODEL + key.yaml))) == key.env_value


@KEYS
def test_load_settings_flag_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: Key) -> None:
    monkeypatch.setenv(key.env_name, key.env_value)
    settings = load_settings(write_yaml(tmp_path, ONE_MODEL + key.yaml), key.flags(key.flag_value))
    assert key.read(settings) == key.flag_value


def test_load_settings_env_override_keeps_sibling_keys_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__TOPIC", "from-env")
    settings = load_settings(write_yaml(tmp_path, ONE_MODEL + "kafka:\n  group_id: from-file\n"))
    assert (settings.kafka.topic, settings.kafka.group_id) == ("from-env", "from-file")


def test_load_settings_ignores_flags_that_are_none(tmp_path: Path) -> None:
    flags = {"kafka": {"topic": None}, "state_dir": None}
    settings = load_settings(write_yaml(tmp_path, ONE_MODEL + "kafka:\n  topic: from-file\n"), flags)
    assert settings.kafka.topic == "from-file"


def test_load_settings_reads_nested_env_into_a_mapping_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__SECURITY__SASL_PLAIN_PASSWORD", "s3cret")
    settings = load_settings(None, {"models": [{"name": "m", "path": "m.onnx"}]})
    assert settings.kafka.security == {"sasl_plain_password": "s3cret"}


@pytest.mark.parametrize(
    ("yaml_text", "dotted"),
    [
        ("kafka:\n  topik: x\n", "kafka.topik"),
        ("sampler:\n  events_per_secnd: 5\n", "sampler.events_per_secnd"),
        ("kafak:\n  topic: x\n", "kafak"),
        ("log_levl: debug\n", "log_levl"),
        ("models:\n  - name: m\n    path: m.onnx\n    scoring:\n      radiuss: 1\n", "models.0.scoring.radiuss"),
    ],
    ids=["nested", "nested-sampler", "top-level-section", "top-level", "in-model-list"],
)
def test_load_settings_names_an_unknown_yaml_key(tmp_path: Path, yaml_text: str, dotted: str) -> None:
    text = yaml_text if yaml_text.startswith("models") else ONE_MODEL + yaml_text
    with pytest.raises(ConfigError, match=rf"unknown key '{dotted}' \(check spelling"):
        load_settings(write_yaml(tmp_path, text))


def test_load_settings_names_an_unknown_nested_env_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__TOPICC", "x")
    with pytest.raises(ConfigError, match=r"unknown key 'kafka\.topicc'"):
        load_settings(write_yaml(tmp_path, ONE_MODEL))


def test_load_settings_names_key_and_value_of_a_wrong_type(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, ONE_MODEL + "kafka:\n  session_timeout_ms: soon\n")
    with pytest.raises(ConfigError, match=r"'kafka\.session_timeout_ms': Input should be a valid integer.*got 'soon'"):
        load_settings(path)


def test_load_settings_names_key_and_value_out_of_range(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, ONE_MODEL + "metrics:\n  port: 70000\n")
    with pytest.raises(ConfigError, match=r"'metrics\.port': Input should be less than or equal to 65535; got 70000"):
        load_settings(path)


def test_load_settings_names_a_wrong_type_from_the_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_SAMPLER__EVENTS_PER_SECOND", "lots")
    with pytest.raises(ConfigError, match=r"'sampler\.events_per_second'.*got 'lots'"):
        load_settings(write_yaml(tmp_path, ONE_MODEL))


def test_load_settings_without_a_model_says_how_to_add_one() -> None:
    with pytest.raises(ConfigError, match=r"no model configured: pass --model M\.onnx or list `models:`"):
        load_settings(None)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param(
            "models:\n  - {name: a, path: a.onnx}\n  - {name: a, path: b.onnx}\n",
            r"'models': model names must be unique; repeated: \['a'\]",
            id="duplicate_model_names",
        ),
        pytest.param(
            "models:\n  - name: m\n", r"'models\.0\.path': Field required", id="a_missing_required_model_field"
        ),
        # YAML reads 2.10 as the float 2.1: accepting numbers would silently pin the wrong version
        pytest.param(
            ONE_MODEL + "kafka:\n  api_version: 2.10\n",
            r"'kafka\.api_version': write the version as a quoted string",
            id="an_unquoted_yaml_api_version",
        ),
        pytest.param("models: [unclosed\n", r"config file '.*monitor\.yaml' is not valid YAML", id="invalid_yaml"),
        pytest.param(
            "- a\n- b\n", r"must be a mapping at the top level; got list", id="a_top_level_that_is_not_a_mapping"
        ),
    ],
)
def test_load_settings_rejects_a_bad_config_file_with_its_reason(tmp_path: Path, text: str, match: str) -> None:
    path = write_yaml(tmp_path, text)
    with pytest.raises(ConfigError, match=match):
        load_settings(path)


@pytest.mark.parametrize(("text", "expected"), [("0.9", (0, 9)), ("2.8.1", (2, 8, 1)), (None, None)])
def test_kafka_settings_api_version_tuple_parses_dotted_versions(
    text: str | None, expected: tuple[int, ...] | None
) -> None:
    assert KafkaSettings(api_version=text).api_version_tuple() == expected


@pytest.mark.parametrize("text", ["x", "", "0.9.", "-1", "v2"])
def test_load_settings_rejects_an_api_version_that_is_not_dotted_numbers(text: str) -> None:
    flags = {"models": [{"name": "m", "path": "m.onnx"}], "kafka": {"api_version": text}}
    with pytest.raises(ConfigError, match=rf"'kafka\.api_version': '{text}' is not a version like '0\.9'"):
        load_settings(None, flags)


def test_load_settings_accepts_an_api_version_from_the_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__API_VERSION", "0.9")
    assert load_settings(write_yaml(tmp_path, ONE_MODEL)).kafka.api_version_tuple() == (0, 9)


def test_kafka_settings_api_version_tuple_rejects_an_unvalidated_value() -> None:
    unchecked = KafkaSettings.model_construct(api_version="x")
    with pytest.raises(ConfigError, match=r"kafka\.api_version 'x' is not like '0\.9' or '2\.8\.1'"):
        unchecked.api_version_tuple()


def test_load_settings_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file '.*absent\.yaml' does not exist"):
        load_settings(tmp_path / "absent.yaml")


def test_load_settings_treats_an_empty_file_as_no_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no model configured"):
        load_settings(write_yaml(tmp_path, "# only a comment\n"))


def test_settings_are_frozen(tmp_path: Path) -> None:
    settings = load_settings(write_yaml(tmp_path, ONE_MODEL))
    with pytest.raises(ValueError, match=r"frozen"):
        settings.log_level = "debug"  # type: ignore[misc]


def test_merge_flags_deep_merges_and_drops_none() -> None:
    merged = merge_flags({"kafka": {"topic": "a", "group_id": "g"}}, {"kafka": {"topic": "b", "api_version": None}})
    assert merged == {"kafka": {"topic": "b", "group_id": "g"}}


def test_load_settings_refuses_a_single_underscore_nested_env_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA_BOOTSTRAP_SERVERS", "broker:9092")
    with pytest.raises(
        ConfigError,
        match=r"unknown environment variable 'HARMONIC_KAFKA_BOOTSTRAP_SERVERS'.*"
        r"nested keys take a double underscore: HARMONIC_KAFKA__BOOTSTRAP_SERVERS",
    ):
        load_settings(write_yaml(tmp_path, ONE_MODEL))


def test_load_settings_refuses_an_env_key_naming_no_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_STATEDIR", "/var/lib/x")
    with pytest.raises(
        ConfigError, match=r"'HARMONIC_STATEDIR': there is no setting 'statedir' \(top-level settings: .*state_dir"
    ):
        load_settings(write_yaml(tmp_path, ONE_MODEL))


def test_load_settings_accepts_top_level_and_non_setting_env_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARMONIC_MAX_EVENT_BYTES", "4096")
    monkeypatch.setenv("HARMONIC_MALLOC_TUNING", "0")
    monkeypatch.setenv("HARMONIC_GC_TUNING", "0")
    assert load_settings(write_yaml(tmp_path, ONE_MODEL)).max_event_bytes == 4096


def test_kafka_fetch_settings_reach_the_consumer_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch settings default to a 100 ms broker wait (kafka-python: 500) and pass through to KafkaSource."""
    from monitor.source.kafka_config import ConsumerConfig

    defaults = ConsumerConfig.from_settings(KafkaSettings())
    assert defaults.fetch_max_wait_ms == 100 and defaults.max_partition_fetch_bytes == 1 << 20
    monkeypatch.setenv("HARMONIC_KAFKA__FETCH_MAX_WAIT_MS", "250")
    settings = load_settings(write_yaml(tmp_path, ONE_MODEL + "kafka:\n  max_partition_fetch_bytes: 4194304\n"))
    args = ConsumerConfig.from_settings(settings.kafka)
    assert args.fetch_max_wait_ms == 250 and args.max_partition_fetch_bytes == 4 << 20
    assert defaults.lean_record_parse is True
    monkeypatch.setenv("HARMONIC_KAFKA__LEAN_RECORD_PARSE", "false")
    assert ConsumerConfig.from_settings(load_settings(write_yaml(tmp_path, ONE_MODEL)).kafka).lean_record_parse is False
    monkeypatch.delenv("HARMONIC_KAFKA__LEAN_RECORD_PARSE")
    monkeypatch.delenv("HARMONIC_KAFKA__FETCH_MAX_WAIT_MS")
    with pytest.raises(ConfigError, match="fetch_max_wait_ms"):
        load_settings(write_yaml(tmp_path, ONE_MODEL + "kafka:\n  fetch_max_wait_ms: -1\n"))


def test_load_settings_reads_max_versions_next_to_the_segment_bound(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "models: [{name: m, path: m.onnx}]\nsegments: {max_versions: 3}\n")
    assert load_settings(path).segments.max_versions == 3
    assert load_settings(None, {"models": [{"name": "m", "path": "m.onnx"}]}).segments.max_versions == 8
    with pytest.raises(ConfigError, match=r"'segments\.max_versions': Input should be greater than or equal to 1"):
        load_settings(write_yaml(tmp_path, "models: [{name: m, path: m.onnx}]\nsegments: {max_versions: 0}\n"))


@pytest.mark.parametrize(
    ("yaml_text", "match"),
    [
        ('models: [{name: "m\\ud800", path: m.onnx}]', r"'models\.0\.name': .*unicode string; got 'm\\ud800'"),
        ('models: [{name: m, path: "m\\0.onnx"}]', r"'models\.0\.path': .* a control character"),
        ('models: [{name: m, path: m.onnx}]\nsegments: {allowed: ["eu\\n"]}', r"'segments\.allowed'"),
        (
            "models: [{name: m, path: m.onnx, scoring: {radius: .inf}}]",
            r"'models\.0\.scoring\.radius': Input should be a finite number",
        ),
        ("? ", r"has top-level key None; expected setting names"),
        ("a: 2026-13-45", r"is not valid YAML"),
    ],
)
def test_load_settings_refuses_text_and_numbers_later_stages_cannot_use(
    tmp_path: Path, yaml_text: str, match: str
) -> None:
    """Found by fuzzing the loader: each went through (and broke a label, a path or the scorer) or leaked a
    UnicodeEncodeError, a TypeError or a ValueError instead of ConfigError."""
    with pytest.raises(ConfigError, match=match) as info:
        load_settings(write_yaml(tmp_path, yaml_text))
    assert str(info.value).encode("utf-8")


def test_load_settings_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_bytes(b"models: [{name: \xff}]")
    with pytest.raises(ConfigError, match=r"is not UTF-8 text .*; save it as UTF-8"):
        load_settings(path)


def test_load_settings_says_that_a_list_setting_from_the_env_must_be_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_MODELS", "m.onnx")
    with pytest.raises(ConfigError, match=r"must be JSON, e\.g\. HARMONIC_MODELS="):
        load_settings()


def test_load_settings_refuses_an_env_value_that_is_not_utf8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__TOPIC", "events\udcff")  # the byte 0xff, as os.environ decodes it
    with pytest.raises(ConfigError, match=r"'kafka\.topic': .*unicode string; got 'events\\udcff'"):
        load_settings(None, {"models": [{"name": "m", "path": "m.onnx"}]})
