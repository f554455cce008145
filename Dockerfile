# syntax=docker/dockerfile:1
#
# harmonic-monitor sidecar image.
#
#   docker build -t harmonic-monitor .                               # runtime only
#   docker build -t harmonic-monitor:convert --build-arg WITH_CONVERT=true .   # + skl2onnx (`convert` command)
#   docker run --rm -p 9108:9108 -v "$PWD/deploy/monitor.example.yaml:/etc/harmonic/monitor.yaml:ro" \
#       -v "$PWD/models:/models:ro" harmonic-monitor
#
# Runs as the unprivileged user `harmonic` (uid 10001). The working directory /var/lib/harmonic is writable by
# it, so the default state_dir ("state") lands in /var/lib/harmonic/state; mount a volume there to keep the
# standardizer, reference and counters across container restarts.

ARG PYTHON_VERSION=3.11

# ---- build: a wheel of the package (no compiler needed; the dependencies are binary wheels) -----------------------
FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY monitor ./monitor
RUN python -m pip wheel --no-deps --wheel-dir /wheels .

# ---- runtime --------------------------------------------------------------------------------------------------------
FROM python:${PYTHON_VERSION}-slim

# true: also install the [convert] extra (skl2onnx) so `harmonic-monitor convert` works inside the image
ARG WITH_CONVERT=false

LABEL org.opencontainers.image.title="harmonic-monitor" \
      org.opencontainers.image.description="Label-free robustness monitoring sidecar for ML models" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/harmonic \
    PATH=/opt/harmonic/bin:$PATH

# A virtual environment keeps the package and its dependencies apart from the base image's site-packages.
# The dependencies' versions come from pyproject.toml's ranges (DL3013 wants pins: the wheel is our own).
COPY --from=build /wheels /tmp/wheels
# hadolint ignore=DL3013
RUN set -eux; \
    python -m venv "$VIRTUAL_ENV"; \
    wheel="$(ls /tmp/wheels/harmonic_monitor-*.whl)"; \
    case "$WITH_CONVERT" in \
      true|1|yes) target="${wheel}[convert]" ;; \
      false|0|no|"") target="${wheel}" ;; \
      *) echo "WITH_CONVERT must be true or false; got '$WITH_CONVERT'" >&2; exit 1 ;; \
    esac; \
    pip install "$target"; \
    rm -rf /tmp/wheels; \
    harmonic-monitor --help >/dev/null

RUN set -eux; \
    groupadd --system --gid 10001 harmonic; \
    useradd --system --uid 10001 --gid harmonic --home-dir /var/lib/harmonic --no-create-home \
        --shell /usr/sbin/nologin harmonic; \
    install -d -o harmonic -g harmonic -m 0750 /var/lib/harmonic; \
    install -d -m 0755 /etc/harmonic

WORKDIR /var/lib/harmonic
USER 10001:10001

# /metrics /healthz /readyz /probes (metrics.port)
EXPOSE 9108

# No curl in the slim image: ask /healthz with the standard library. The port follows HARMONIC_METRICS__PORT
# when the port is moved by environment; the proxy handler is emptied so an HTTP(S)_PROXY in the environment
# is never used for a loopback check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:' + os.environ.get('HARMONIC_METRICS__PORT', '9108') + '/healthz', timeout=4)"]

# SIGTERM: finish the batch in hand, commit offsets, persist state, exit 0 (bounded by shutdown_timeout_seconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["harmonic-monitor"]
CMD ["run", "--config", "/etc/harmonic/monitor.yaml"]
