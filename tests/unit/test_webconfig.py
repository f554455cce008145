"""Stage 6: the web config file (monitor/exporters/webconfig.py) — parsing and its errors, the TLS context, and
basic auth (good, bad and missing credentials, the cache of verified ones) without a server."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import bcrypt
import pytest

from monitor.errors import ConfigError
from monitor.exporters.webconfig import BasicAuth, load_web_config, parse_web_config
from tests.unit.tls_certs import CertFiles, self_signed

#: cost 4: the lowest bcrypt allows, so that tests stay fast (production hashes use 10 or more)
HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4))


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return self_signed(tmp_path_factory.mktemp("tls"))


# ---------------------------------------------------------------------- parsing


def test_parse_web_config_reads_tls_and_users_and_resolves_relative_paths(tmp_path: Path) -> None:
    config = parse_web_config(
        {
            "tls_server_config": {"cert_file": "tls.crt", "key_file": "/abs/tls.key", "min_version": "TLS13"},
            "basic_auth_users": {"prometheus": HASH.decode()},
        },
        base=tmp_path,
    )
    assert config.tls is not None
    assert config.tls.cert_file == tmp_path / "tls.crt"
    assert config.tls.key_file == Path("/abs/tls.key")
    assert config.tls.min_version == "TLS13"
    assert config.tls.client_auth_type == "NoClientCert"
    assert config.users == {"prometheus": HASH}


def test_parse_web_config_of_an_empty_file_means_no_tls_and_no_auth() -> None:
    config = parse_web_config(None)
    assert config.tls is None and not config.users and config.ssl_context is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([1, 2], r"the top level must be a mapping.*got list"),
        ({"tls_config": {}}, r"unknown key tls_config; this server reads tls_server_config, basic_auth_users"),
        ({"tls_server_config": {"key_file": "k"}}, r"tls_server_config.cert_file is required"),
        ({"tls_server_config": {"cert_file": "c"}}, r"tls_server_config.key_file is required .*Add it"),
        (
            {"tls_server_config": {"cert_file": "c", "key_file": "k", "cipher_suites": ["x"]}},
            r"unknown key tls_server_config.cipher_suites",
        ),
        (
            {"tls_server_config": {"cert_file": "c", "key_file": "k", "min_version": "TLS1.2"}},
            r"tls_server_config.min_version must be one of TLS10, TLS11, TLS12, TLS13; got 'TLS1.2'",
        ),
        (
            {"tls_server_config": {"cert_file": "c", "key_file": "k", "min_version": "TLS13", "max_version": "TLS12"}},
            r"max_version TLS12 is below min_version TLS13",
        ),
        (
            {"tls_server_config": {"cert_file": "c", "key_file": "k", "client_auth_type": "RequireAnyClientCert"}},
            r"client_auth_type must be one of .*got 'RequireAnyClientCert'.*not supported",
        ),
        (
            {
                "tls_server_config": {
                    "cert_file": "c",
                    "key_file": "k",
                    "client_auth_type": "RequireAndVerifyClientCert",
                }
            },
            r"needs client_ca_file; got none",
        ),
        ({"tls_server_config": {"cert_file": 3, "key_file": "k"}}, r"tls_server_config.cert_file must be a string"),
        ({"basic_auth_users": ["prometheus"]}, r"basic_auth_users must be a mapping"),
        ({"basic_auth_users": {"prom": "plaintext"}}, r"basic_auth_users.prom must be a bcrypt hash .*not shown"),
        ({"basic_auth_users": {"a:b": HASH.decode()}}, r"user name 'a:b' must be non-empty and hold no ':'"),
    ],
)
def test_parse_web_config_rejects_malformed_keys_naming_them(raw: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_web_config(raw)


def test_parse_web_config_never_prints_a_rejected_hash() -> None:
    with pytest.raises(ConfigError) as info:
        parse_web_config({"basic_auth_users": {"prom": "hunter2-the-password"}})
    assert "hunter2" not in str(info.value)


def test_load_web_config_builds_a_tls_context(tmp_path: Path, certs: CertFiles) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n", encoding="utf-8")
    config = load_web_config(path)
    assert isinstance(config.ssl_context, ssl.SSLContext)
    assert config.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert config.ssl_context.verify_mode == ssl.CERT_NONE


def test_load_web_config_verifies_client_certificates_when_asked(tmp_path: Path, certs: CertFiles) -> None:
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.cert}\n",
        encoding="utf-8",
    )
    ctx = load_web_config(path).ssl_context
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED


def test_load_web_config_names_the_key_of_an_unreadable_certificate(tmp_path: Path, certs: CertFiles) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {certs.key}\n  key_file: {certs.key}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"web_config_file .*cert_file .* and key_file .* loading them failed"):
        load_web_config(path)


def test_load_web_config_names_a_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"metrics.web_config_file .*cannot read it.*unset metrics.web_config_file"):
        load_web_config(tmp_path / "absent.yml")
    (tmp_path / "bad.yml").write_text("tls_server_config: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"not valid YAML"):
        load_web_config(tmp_path / "bad.yml")


def test_the_example_web_config_parses() -> None:
    example = Path(__file__).resolve().parents[2] / "deploy" / "web-config.example.yml"
    import yaml

    config = parse_web_config(yaml.safe_load(example.read_text(encoding="utf-8")))
    assert config.tls is not None and config.users


# ---------------------------------------------------------------------- BasicAuth


def test_basic_auth_accepts_the_right_password() -> None:
    assert BasicAuth({"prom": HASH}).verify(basic("prom", "s3cret"))


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        basic("prom", "wrong"),
        basic("nobody", "s3cret"),
        "Bearer abc",
        "Basic !!!not-base64",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        basic("prom", "x" * 100),  # over bcrypt's 72 bytes: bcrypt 5 raises, the check says no
    ],
)
def test_basic_auth_refuses_missing_wrong_or_malformed_credentials(header: str | None) -> None:
    assert not BasicAuth({"prom": HASH}).verify(header)


def test_basic_auth_caches_a_success_for_cache_seconds_only() -> None:
    clock = FakeClock()
    auth = BasicAuth({"prom": HASH}, cache_seconds=60.0, clock=clock)
    header = basic("prom", "s3cret")
    assert not auth.cached(header)
    assert auth.verify(header) and auth.bcrypt_checks == 1
    clock.now += 59.0
    assert auth.cached(header) and auth.verify(header) and auth.bcrypt_checks == 1
    clock.now += 1.0
    assert not auth.cached(header)
    assert auth.verify(header) and auth.bcrypt_checks == 2


def test_basic_auth_never_caches_a_failure() -> None:
    auth = BasicAuth({"prom": HASH})
    for _ in range(2):
        assert not auth.verify(basic("prom", "wrong"))
        assert not auth.cached(basic("prom", "wrong"))
    assert auth.bcrypt_checks == 2


def test_basic_auth_cache_does_not_accept_another_password_of_the_same_user() -> None:
    auth = BasicAuth({"prom": HASH})
    assert auth.verify(basic("prom", "s3cret"))
    assert not auth.cached(basic("prom", "s3cret2"))


def test_basic_auth_rejects_no_users() -> None:
    with pytest.raises(ValueError, match=r"users must not be empty"):
        BasicAuth({})


# ---------------------------------------------------------------------- check-config


def test_check_config_refuses_a_malformed_web_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.cli import main

    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prom: plaintext\n", encoding="utf-8")
    config = tmp_path / "monitor.yaml"
    config.write_text(f"models: [{{name: m, path: m.onnx}}]\nmetrics:\n  web_config_file: {web}\n", encoding="utf-8")
    code = main(["check-config", "--no-load-models", "--config", str(config)])
    assert code == 2
    assert "basic_auth_users.prom must be a bcrypt hash" in capsys.readouterr().err


def test_check_config_accepts_a_valid_web_config_file(
    tmp_path: Path, certs: CertFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    from monitor.cli import main

    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n"
        f"basic_auth_users:\n  prom: '{HASH.decode()}'\n",
        encoding="utf-8",
    )
    config = tmp_path / "monitor.yaml"
    config.write_text(f"models: [{{name: m, path: m.onnx}}]\nmetrics:\n  web_config_file: {web}\n", encoding="utf-8")
    assert main(["check-config", "--no-load-models", "--config", str(config)]) == 0
    assert '"web_config_file"' in capsys.readouterr().out
