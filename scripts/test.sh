#!/usr/bin/env bash
# The project's test command (README "Run the tests"; .ci/run calls exactly this).
# On a fresh Debian 12 machine it: creates .venv, installs the package with its dev extra, fetches the real
# services the integration tests start on 127.0.0.1 (Kafka 0.9 + ZooKeeper, Tansu, Alertmanager, Prometheus) and
# the container image's build tools and base, then runs format/lint/type checks and the whole pytest suite (unit,
# slow and integration; nothing skipped).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'

bash scripts/install-services.sh
bash scripts/install-alertmanager.sh
bash scripts/install-prometheus.sh
# buildah + mmdebstrap and the local python:3.11-slim base (cached in .cache/image/); the image itself is built by
# tests/integration/test_image.py, from the tree it tests
bash scripts/build-image.sh --prepare
# headless Chromium (Debian's package, no browser download): tests/unit/test_report_page.py renders the report page
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

echo "== ruff format --check"; .venv/bin/ruff format --check .
echo "== ruff check";          .venv/bin/ruff check .
echo "== mypy";                .venv/bin/mypy
# The suite on every core: each xdist worker starts its own brokers and services on free loopback ports the first
# time one of its tests needs them; a test file stays on one worker, so a module-scoped fixture (a sidecar, a service) starts once. PYTEST_WORKERS overrides.
# Coverage is not measured here: its tracing nearly doubles the unit tests' CPU time and, with pyproject's
# `patch = ["subprocess"]`, slows every sidecar process too, on CI's 2 cores; `bash scripts/test.sh --cov=monitor
# --cov-report=term` measures it.
echo "== pytest";              .venv/bin/pytest -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" --dist loadfile \
    --durations=30 "$@"
