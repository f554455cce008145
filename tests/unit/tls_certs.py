"""A self-signed certificate for TLS tests, made with the ``openssl`` command line (the ``cryptography`` package is
not a dependency). Without ``openssl`` the tests fail with what to install; they are never skipped."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "the `openssl` command is needed to make a test certificate: `apt-get install openssl`"


@dataclass(frozen=True, slots=True)
class CertFiles:
    cert: Path
    key: Path


def self_signed(folder: Path, name: str = "server") -> CertFiles:
    """A P-256 certificate for ``localhost`` and 127.0.0.1 (SANs: Go, i.e. Prometheus, ignores the CN), valid 1 day."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError(INSTALL_HINT)
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    done = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl req failed ({done.returncode}): {done.stderr}\n{INSTALL_HINT}")
    return CertFiles(cert, key)
