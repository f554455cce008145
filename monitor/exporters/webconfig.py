"""Stage 6: the HTTP endpoint's web config file — TLS and basic auth in the Prometheus exporter-toolkit's format,
read once at start by ``run`` and ``check-config``.

The file (``metrics.web_config_file``; docs/OPERATIONS.md, "HTTP endpoint"; ``deploy/web-config.example.yml``)::

    tls_server_config:
      cert_file: /etc/harmonic/tls/tls.crt
      key_file: /etc/harmonic/tls/tls.key
      client_auth_type: NoClientCert        # or VerifyClientCertIfGiven, RequireAndVerifyClientCert
      client_ca_file: /etc/harmonic/tls/ca.crt  # needed by the two Verify... types
      min_version: TLS12                    # TLS10 .. TLS13; max_version likewise
    basic_auth_users:
      prometheus: $2b$10$...                # bcrypt hash: python -c "import bcrypt; print(bcrypt.hashpw(...))"

Either section may be left out. Keys the toolkit has but this server does not implement (``cipher_suites``,
``curve_preferences``, ``http_server_config``, ...) fail loudly rather than being ignored, as do
``RequestClientCert`` and ``RequireAnyClientCert`` (client certificates that are not verified: the standard
library's ``ssl`` cannot ask for a certificate without verifying it).

:class:`BasicAuth` checks ``Authorization: Basic`` credentials: bcrypt (slow by design, ~0.1 s at cost 10) compares
the password in constant time; an unknown user is compared against a dummy hash so that the answer takes as long as
for a known one. A successful check is cached for ``cache_seconds`` under a SHA-256 of the credentials, so a
scraper every 15 s costs one bcrypt a minute. The server runs :meth:`BasicAuth.verify` off its event loop.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import bcrypt
import yaml

from monitor.errors import ConfigError

#: the exporter-toolkit's names → the standard library's
TLS_VERSIONS: Final[Mapping[str, ssl.TLSVersion]] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
#: client_auth_type → (verify mode, needs client_ca_file)
CLIENT_AUTH_TYPES: Final[Mapping[str, tuple[ssl.VerifyMode, bool]]] = {
    "NoClientCert": (ssl.CERT_NONE, False),
    "VerifyClientCertIfGiven": (ssl.CERT_OPTIONAL, True),
    "RequireAndVerifyClientCert": (ssl.CERT_REQUIRED, True),
}
_TOP_KEYS = ("tls_server_config", "basic_auth_users")
_TLS_KEYS = ("cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version")
REALM: Final = "harmonic-monitor"
#: compared against when the user is unknown, so that a wrong user costs what a wrong password does
_DUMMY_HASH: Final = b"$2b$10$lZJCL1esAL/6fCPqJMwpp.jKi6g5Z.O1ZlOV3/vIxR2UJ2GIdtZFy"


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """``tls_server_config``: file paths as given (relative ones resolved against the web config file's folder)."""

    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str | None = None

    def context(self, source: str = "tls_server_config") -> ssl.SSLContext:
        """A server-side :class:`ssl.SSLContext` with the certificate loaded.

        Raises
        ------
        ConfigError
            If a file cannot be read or does not hold what the key says (naming the key and the path).
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = TLS_VERSIONS[self.min_version]
        if self.max_version is not None:
            ctx.maximum_version = TLS_VERSIONS[self.max_version]
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{source}: cert_file '{self.cert_file}' and key_file '{self.key_file}' must be a PEM certificate "
                f"(chain) and its private key; loading them failed: {exc}. Check the paths and that the key matches "
                "the certificate"
            ) from exc
        mode, _ = CLIENT_AUTH_TYPES[self.client_auth_type]
        if self.client_ca_file is not None:
            try:
                ctx.load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"{source}: client_ca_file '{self.client_ca_file}' must be PEM CA certificates; loading it "
                    f"failed: {exc}. Check the path"
                ) from exc
        ctx.verify_mode = mode
        return ctx


@dataclass(frozen=True, slots=True)
class WebConfig:
    """A parsed web config file: TLS (None: plain HTTP) and basic-auth users (empty: no auth).

    ``ssl_context`` is built (and the files read) by :func:`load_web_config`, so a bad certificate fails at start.
    """

    tls: TlsConfig | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None
    source: str = "<web config>"


def parse_web_config(raw: object, *, source: str = "<web config>", base: Path | None = None) -> WebConfig:
    """Validate a loaded YAML document as a web config (no file I/O; see :func:`load_web_config`).

    Parameters
    ----------
    raw : object
        What ``yaml.safe_load`` returned (None for an empty file: no TLS, no auth).
    source : str
        Named in error messages (the file's path).
    base : Path, optional
        Folder that relative ``*_file`` paths are resolved against (the toolkit resolves them against the file's).

    Raises
    ------
    ConfigError
        Naming the key, what was expected, what arrived, and the fix.

    Examples
    --------
    >>> parse_web_config({"basic_auth_users": {"prom": "$2b$04$" + "a" * 53}}).users.keys()
    dict_keys(['prom'])
    >>> parse_web_config({"tls_server_config": {"cert_file": "c.pem"}})
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: <web config>: tls_server_config.key_file is required (a PEM private key path); got nothing. Add it next to cert_file
    """
    if raw is None:
        return WebConfig(source=source)
    top = _mapping(raw, "the top level", source)
    _no_unknown(top, _TOP_KEYS, "", source)
    tls = None
    if top.get("tls_server_config") is not None:
        tls = _parse_tls(_mapping(top["tls_server_config"], "tls_server_config", source), source, base)
    users: dict[str, bytes] = {}
    if top.get("basic_auth_users") is not None:
        for user, hashed in _mapping(top["basic_auth_users"], "basic_auth_users", source).items():
            users[user] = _bcrypt_hash(user, hashed, source)
    return WebConfig(tls=tls, users=users, source=source)


def load_web_config(path: Path | str) -> WebConfig:
    """Read, validate and build a web config file: TLS context loaded, users' hashes checked.

    Raises
    ------
    ConfigError
        If the file cannot be read, is not YAML, or any key is wrong (see :func:`parse_web_config`).
    """
    path = Path(path)
    source = f"metrics.web_config_file '{path}'"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read it ({exc}). Fix the path or unset metrics.web_config_file") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({exc}). Compare with deploy/web-config.example.yml") from exc
    config = parse_web_config(raw, source=source, base=path.parent)
    if config.tls is None:
        return config
    return WebConfig(tls=config.tls, users=config.users, ssl_context=config.tls.context(source), source=source)


def _mapping(value: object, key: str, source: str) -> dict[str, object]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConfigError(
            f"{source}: {key} must be a mapping of names to values; got {type(value).__name__} {_show(value)}. "
            "Compare with deploy/web-config.example.yml"
        )
    return value


def _no_unknown(mapping: Mapping[str, object], known: tuple[str, ...], prefix: str, source: str) -> None:
    for key in mapping:
        if key not in known:
            raise ConfigError(
                f"{source}: unknown key {prefix}{key}; this server reads {', '.join(prefix + k for k in known)}. "
                "Remove it or fix its spelling (exporter-toolkit options not listed are not implemented)"
            )


def _parse_tls(tls: dict[str, object], source: str, base: Path | None) -> TlsConfig:
    _no_unknown(tls, _TLS_KEYS, "tls_server_config.", source)
    for key, what in (("cert_file", "a PEM certificate path"), ("key_file", "a PEM private key path")):
        if tls.get(key) in (None, ""):
            raise ConfigError(
                f"{source}: tls_server_config.{key} is required ({what}); got nothing. "
                f"Add it next to {'key_file' if key == 'cert_file' else 'cert_file'}"
            )
    for key in _TLS_KEYS:
        if tls.get(key) is not None and not isinstance(tls[key], str):
            raise ConfigError(
                f"{source}: tls_server_config.{key} must be a string; got {type(tls[key]).__name__} "
                f"{_show(tls[key])}. Quote it"
            )
    auth = str(tls.get("client_auth_type") or "NoClientCert")
    if auth not in CLIENT_AUTH_TYPES:
        raise ConfigError(
            f"{source}: tls_server_config.client_auth_type must be one of {', '.join(CLIENT_AUTH_TYPES)}; got "
            f"{auth!r}. RequestClientCert and RequireAnyClientCert (unverified client certificates) are not "
            "supported: use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file"
        )
    ca = tls.get("client_ca_file")
    if CLIENT_AUTH_TYPES[auth][1] and not ca:
        raise ConfigError(
            f"{source}: tls_server_config.client_auth_type {auth} verifies client certificates and needs "
            "client_ca_file; got none. Add client_ca_file (the CA that signs the scrapers' certificates)"
        )
    versions: dict[str, str | None] = {}
    for key, default in (("min_version", "TLS12"), ("max_version", None)):
        value = tls.get(key) or default
        if value is not None and value not in TLS_VERSIONS:
            raise ConfigError(
                f"{source}: tls_server_config.{key} must be one of {', '.join(TLS_VERSIONS)}; got {value!r}. "
                "Use the exporter-toolkit's spelling, e.g. TLS12"
            )
        versions[key] = None if value is None else str(value)
    low, high = versions["min_version"], versions["max_version"]
    if high is not None and low is not None and TLS_VERSIONS[high] < TLS_VERSIONS[low]:
        raise ConfigError(
            f"{source}: tls_server_config.max_version {high} is below min_version {low}. Raise max_version"
        )

    def resolve(value: object) -> Path:
        p = Path(str(value))
        return p if p.is_absolute() or base is None else base / p

    return TlsConfig(
        cert_file=resolve(tls["cert_file"]),
        key_file=resolve(tls["key_file"]),
        client_auth_type=auth,
        client_ca_file=None if not ca else resolve(ca),
        min_version=str(low),
        max_version=high,
    )


def _bcrypt_hash(user: str, hashed: object, source: str) -> bytes:
    if not user or ":" in user:
        raise ConfigError(
            f"{source}: basic_auth_users: user name {user!r} must be non-empty and hold no ':' (HTTP basic auth "
            "splits on it). Rename the user"
        )
    text = hashed if isinstance(hashed, str) else ""
    parts = text.split("$")
    # $2a$ / $2b$ / $2y$, two-digit cost, 53 characters of salt and hash
    if len(parts) != 4 or parts[1] not in ("2a", "2b", "2y") or not parts[2].isdigit() or len(parts[3]) != 53:
        raise ConfigError(
            f"{source}: basic_auth_users.{user} must be a bcrypt hash ('$2b$10$' followed by 53 characters); got "
            f"{type(hashed).__name__} of {len(str(hashed))} characters (not shown). Make one with: python -c "
            "\"import bcrypt; print(bcrypt.hashpw(b'PASSWORD', bcrypt.gensalt()).decode())\", and quote it in YAML"
        )
    return text.encode("ascii")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class BasicAuth:
    """Checks ``Authorization`` header values against bcrypt-hashed users; caches successes briefly.

    Parameters
    ----------
    users : mapping
        User name → bcrypt hash (bytes), as :class:`WebConfig` holds them; must not be empty.
    cache_seconds : float
        How long a verified (user, password) pair is accepted without bcrypt again.
    max_cached : int
        Cached pairs at most (a full cache is cleared: only working scrapers are cached, so it never fills in
        practice).
    clock : callable
        Monotonic seconds (injected for tests).

    Examples
    --------
    >>> import bcrypt, base64
    >>> auth = BasicAuth({"prom": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4))})
    >>> header = "Basic " + base64.b64encode(b"prom:s3cret").decode()
    >>> auth.cached(header), auth.verify(header), auth.cached(header)
    (False, True, True)
    >>> auth.verify("Basic " + base64.b64encode(b"prom:wrong").decode()), auth.verify(None)
    (False, False)
    """

    def __init__(
        self,
        users: Mapping[str, bytes],
        *,
        cache_seconds: float = 60.0,
        max_cached: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not users:
            raise ValueError("users must not be empty; without users there is no basic auth to check")
        if not cache_seconds >= 0:
            raise ValueError(f"cache_seconds must be >= 0; got {cache_seconds!r}")
        self._users = dict(users)
        self._cache_seconds = cache_seconds
        self._max_cached = max_cached
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[bytes, float] = {}  # SHA-256 of "user:password" → expiry
        self.bcrypt_checks = 0

    def cached(self, header: str | None) -> bool:
        """True if these credentials were verified less than ``cache_seconds`` ago; cheap, safe on the loop."""
        key = _cache_key(header)
        if key is None:
            return False
        with self._lock:
            expiry = self._cache.get(key)
            if expiry is None:
                return False
            if self._clock() >= expiry:
                del self._cache[key]
                return False
            return True

    def verify(self, header: str | None) -> bool:
        """True if the header carries a known user and its password; runs bcrypt (~0.1 s) unless cached.

        Never raises on client input: a missing, malformed or over-long credential is False.
        """
        if self.cached(header):
            return True
        credentials = _decode(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self._users.get(user)
        self.bcrypt_checks += 1
        try:
            # constant time within bcrypt; the dummy hash makes an unknown user cost the same as a known one
            ok = bcrypt.checkpw(password, hashed if hashed is not None else _DUMMY_HASH) and hashed is not None
        except ValueError:  # bcrypt 5 refuses passwords over 72 bytes; such a password was never hashed here
            ok = False
        if ok:
            key = _cache_key(header)
            assert key is not None
            with self._lock:
                if len(self._cache) >= self._max_cached:
                    self._cache.clear()
                self._cache[key] = self._clock() + self._cache_seconds
        return ok


def _decode(header: str | None) -> tuple[str, bytes] | None:
    """``Basic base64(user:password)`` → (user, password bytes); None when absent or malformed."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep:
        return None
    return user.decode("utf-8", errors="replace"), password


def _cache_key(header: str | None) -> bytes | None:
    credentials = _decode(header)
    if credentials is None:
        return None
    user, password = credentials
    # a digest, not the password, stays in memory; dict lookup on a digest leaks nothing useful about the password
    return hashlib.sha256(user.encode() + b"\0" + password).digest()


def unauthorized_header() -> str:
    """The ``WWW-Authenticate`` value sent with a 401."""
    return f'Basic realm="{REALM}"'


__all__ = [
    "CLIENT_AUTH_TYPES",
    "REALM",
    "TLS_VERSIONS",
    "BasicAuth",
    "TlsConfig",
    "WebConfig",
    "load_web_config",
    "parse_web_config",
    "unauthorized_header",
]
