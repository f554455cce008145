# syntax=docker/dockerfile:1
#
# harmonic-monitor sidecar image (includes the [convert] extra: `demo` and `convert` work inside it).
#
#   docker build -t harmonic-monitor .
#   docker run --rm -p 9108:9108 -v "$PWD/deploy/monitor.example.yaml:/etc/harmonic/monitor.yaml:ro" \
#       -v "$PWD/models:/models:ro" harmonic-monitor
#   docker run --rm harmonic-monitor demo --no-serve                 # the README's demo, no Kafka needed
#
# Without a registry: `bash scripts/build-image.sh` makes the python:3.11-slim base from Debian's packages
# (mmdebstrap) and builds this file with buildah; CI builds and runs the image that way
# (tests/integration/test_image.py). That base has Debian's python3 at /usr/bin, the official one has
# /usr/local/bin: every step below calls `python` from PATH and works on both.
#
# Health: in Kubernetes the probes are the image's health: startupProbe/livenessProbe on /healthz, and
# readinessProbe on /readyz where the monitor runs as its own Deployment (deploy/kubernetes/). Kubernetes
# ignores HEALTHCHECK. The HEALTHCHECK below is for `docker run` and compose; it lives in the Docker image
# format only: `docker build` keeps it, `buildah bud`/`podman build` keep it with `--format docker` (as
# scripts/build-image.sh does) and drop it, with a warning, in their default OCI format.
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

LABEL org.opencontainers.image.title="harmonic-monitor" \
      org.opencontainers.image.description="Label-free robustness monitoring sidecar for ML models" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/harmonic \
    PATH=/opt/harmonic/bin:$PATH

# A virtual environment keeps the package and its dependencies apart from the base image's site-packages (and
# from Debian's "externally managed" python3). The dependencies' versions come from pyproject.toml's ranges
# (DL3013 wants pins: the wheel is our own). The [convert] extra is skl2onnx alone (about 3 MB: onnx and
# scikit-learn are runtime dependencies already), and `demo` trains and converts a model with it.
COPY --from=build /wheels /tmp/wheels
# hadolint ignore=DL3013
RUN set -eux; \
    python -m venv "$VIRTUAL_ENV"; \
    wheel="$(ls /tmp/wheels/harmonic_monitor-*.whl)"; \
    pip install "${wheel}[convert]"; \
    rm -rf /tmp/wheels; \
    harmonic-monitor --help >/dev/null; \
    python -c "import skl2onnx"; \
    python -c "import kafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd() and c.xxhash, 'a codec library is missing'"

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

# For docker and compose only (see the header: Kubernetes probes /healthz and /readyz itself, and the OCI image
# format has no HEALTHCHECK). No curl in the slim image: ask /healthz with the standard library. The port follows
# HARMONIC_METRICS__PORT when the port is moved by environment; the proxy handler is emptied so an HTTP(S)_PROXY
# in the environment is never used for a loopback check. With TLS on (metrics.web_config_file given by environment)
# it asks over https without verifying the certificate: a loopback liveness check, and /healthz needs no credentials.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, ssl, urllib.request as u; p = os.environ.get('HARMONIC_METRICS__PORT', '9108'); o = u.build_opener(u.ProxyHandler({}), u.HTTPSHandler(context=ssl._create_unverified_context())); t = os.environ.get('HARMONIC_METRICS__WEB_CONFIG_FILE') and 'https' or 'http'; o.open(t + '://127.0.0.1:' + p + '/healthz', timeout=4)"]

# SIGTERM: finish the batch in hand, commit offsets, persist state, exit 0 (bounded by shutdown_timeout_seconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["harmonic-monitor"]
CMD ["run", "--config", "/etc/harmonic/monitor.yaml"]
