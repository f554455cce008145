#!/usr/bin/env bash
# Build the container image from ./Dockerfile with buildah, without any registry of base images.
#
#   bash scripts/build-image.sh [--prepare] [TAG]      # TAG default: localhost/harmonic-monitor:dev
#
# No image registry is reachable here, but Debian's packages are, so the Dockerfile's base image
# (python:3.11-slim) is made locally: mmdebstrap writes a minimal Debian bookworm with python3, venv, pip and
# python-is-python3 (so `python` exists as in the official image; Debian's python3 is 3.11 at /usr/bin), and
# buildah imports that tree under the base's name. `buildah bud --pull-never` then builds the real Dockerfile.
#
#   --prepare   install buildah/mmdebstrap and make the base image, build nothing (scripts/test.sh runs this
#               before pytest, so that tests/integration/test_image.py only spends time on the build itself)
#
# What is kept between runs, under .cache/image/ (gitignored; HARMONIC_IMAGE_CACHE moves it):
#   base-*.tar     the mmdebstrap tree (~50 s to make), remade after 7 days to pick up Debian security updates
#   storage.conf   the containers-storage configuration every buildah call here uses; the test reads it too
#                  (CONTAINERS_STORAGE_CONF=.cache/image/storage.conf buildah images  lists what is stored)
#   storage-*/     the images: the imported base (~20 s to import) and the last build of TAG
#
# Storage driver: overlay where the kernel mounts it (a `buildah from` of the built image is then instant),
# else vfs, which copies every layer (about a minute per container of this image on CI's 2 cores).
# HARMONIC_IMAGE_STORAGE_DRIVER=vfs|overlay forces one.
#
# Format: docker, not OCI: the OCI image config has no HEALTHCHECK, and buildah drops it with a warning.
# Needs root (apt-get, mmdebstrap in root mode, buildah), as on the dev machines and CI.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="${HARMONIC_IMAGE_CACHE:-${REPO_ROOT}/.cache/image}"

PREPARE_ONLY=0
if [[ "${1:-}" == "--prepare" ]]; then
    PREPARE_ONLY=1
    shift
fi
TAG="${1:-localhost/harmonic-monitor:dev}"

# The Dockerfile's `FROM python:${PYTHON_VERSION}-slim` with its default PYTHON_VERSION: the name the local base
# is committed under. bookworm's python3 is 3.11, so the name does not lie about the version.
BASE_NAME="python:3.11-slim"
SUITE="bookworm"
BASE_PACKAGES="python3,python3-venv,python3-pip,python-is-python3,ca-certificates"
# Docs, man pages and translations are of no use in the image (the official slim images drop them too);
# copyright files stay, for the licences.
MMDEBSTRAP_OPTIONS=(
    --variant=minbase
    "--include=${BASE_PACKAGES}"
    "--dpkgopt=path-exclude=/usr/share/doc/*"
    "--dpkgopt=path-include=/usr/share/doc/*/copyright"
    "--dpkgopt=path-exclude=/usr/share/man/*"
    "--dpkgopt=path-exclude=/usr/share/locale/*"
)
BASE_MAX_AGE_DAYS=7

say() { printf 'build-image: %s\n' "$*"; }
die() { printf 'build-image: ERROR: %s\n' "$*" >&2; exit 1; }
seconds_since() { echo $(( $(date +%s) - $1 )); }

[[ "$(id -u)" -eq 0 ]] || die "run as root: apt-get, mmdebstrap (root mode) and buildah's storage need it"
command -v tar >/dev/null || die "tar not found (apt-get install -y tar)"

# --- tools -----------------------------------------------------------------------------------------------------------
# Debian's packages, no recommends: `buildah bud/run --isolation chroot` needs no OCI runtime (runc/crun), and
# mmdebstrap runs in root mode without the unshare helpers.
if command -v buildah >/dev/null && command -v mmdebstrap >/dev/null; then
    say "tools already installed: $(buildah --version), $(mmdebstrap --version)"
else
    started=$(date +%s)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends buildah mmdebstrap >/dev/null
    say "installed $(buildah --version), $(mmdebstrap --version) in $(seconds_since "${started}") s"
fi

# --- storage ---------------------------------------------------------------------------------------------------------
mkdir -p "${CACHE_DIR}"
overlay_mounts() {
    # the kernel's answer, not a guess: mount an empty overlay once (fails in a container without privileges, or
    # where the cache lies on an overlay itself)
    local probe ok=1
    probe="$(mktemp -d "${CACHE_DIR}/.overlay-probe.XXXXXX")"
    mkdir -p "${probe}/lower" "${probe}/upper" "${probe}/work" "${probe}/merged"
    if mount -t overlay overlay \
        -o "lowerdir=${probe}/lower,upperdir=${probe}/upper,workdir=${probe}/work" "${probe}/merged" 2>/dev/null; then
        umount "${probe}/merged"
        ok=0
    fi
    rm -rf "${probe}"
    return "${ok}"
}
DRIVER="${HARMONIC_IMAGE_STORAGE_DRIVER:-}"
if [[ -z "${DRIVER}" ]]; then
    if overlay_mounts; then DRIVER=overlay; else DRIVER=vfs; fi
fi
[[ "${DRIVER}" == overlay || "${DRIVER}" == vfs ]] || die "HARMONIC_IMAGE_STORAGE_DRIVER must be overlay or vfs; got '${DRIVER}'"
# one graph root per driver: containers/storage refuses a root that another driver wrote
export CONTAINERS_STORAGE_CONF="${CACHE_DIR}/storage.conf"
cat >"${CONTAINERS_STORAGE_CONF}.tmp" <<EOF
# written by scripts/build-image.sh; read by every buildah call of the build and of tests/integration/test_image.py
[storage]
driver = "${DRIVER}"
graphroot = "${CACHE_DIR}/storage-${DRIVER}"
runroot = "${CACHE_DIR}/run-${DRIVER}"
EOF
mv "${CONTAINERS_STORAGE_CONF}.tmp" "${CONTAINERS_STORAGE_CONF}"
say "storage: ${DRIVER} in ${CACHE_DIR#"${REPO_ROOT}/"}/storage-${DRIVER}"

# --- base image ------------------------------------------------------------------------------------------------------
# The tarball's name carries a hash of what it was made from, so a change to the package list makes a new one.
base_key="$(printf '%s\n' "${SUITE}" "${MMDEBSTRAP_OPTIONS[@]}" | sha256sum | cut -c1-12)"
BASE_TAR="${CACHE_DIR}/base-${SUITE}-${base_key}.tar"
fresh_base=0
if [[ -f "${BASE_TAR}" && -n "$(find "${BASE_TAR}" -mtime -"${BASE_MAX_AGE_DAYS}")" ]]; then
    say "base tree: ${BASE_TAR#"${REPO_ROOT}/"} (cached)"
else
    started=$(date +%s)
    find "${CACHE_DIR}" -maxdepth 1 -name 'base-*.tar' -delete
    # written aside, then renamed: an interrupted run never leaves a truncated tarball that looks cached
    mmdebstrap --quiet --format=tar "${MMDEBSTRAP_OPTIONS[@]}" "${SUITE}" "${BASE_TAR}.part" \
        || die "mmdebstrap ${SUITE} failed (needs Debian's package mirrors)"
    mv "${BASE_TAR}.part" "${BASE_TAR}"
    fresh_base=1
    say "base tree: made ${BASE_TAR#"${REPO_ROOT}/"} ($(du -m "${BASE_TAR}" | cut -f1) MB) in $(seconds_since "${started}") s"
fi

# The imported image is labelled with the tarball it came from, so a new tarball is imported again (the label
# stays on the built image too: it says which base tree it was built on).
imported_from="$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "io.harmonic.base-tar"}}' \
    "${BASE_NAME}" 2>/dev/null || true)"
if [[ "${fresh_base}" == 0 && "${imported_from}" == "$(basename "${BASE_TAR}")" ]]; then
    say "base image: ${BASE_NAME} (imported before)"
else
    started=$(date +%s)
    container="$(buildah from scratch)"
    trap 'buildah rm "${container}" >/dev/null 2>&1 || true' EXIT
    root="$(buildah mount "${container}")"
    tar -xf "${BASE_TAR}" -C "${root}"
    buildah umount "${container}" >/dev/null
    # what the official image sets and the Dockerfile relies on: a PATH, a shell-less default command
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd python3 \
        --label "io.harmonic.base-tar=$(basename "${BASE_TAR}")" "${container}"
    buildah commit --quiet --rm "${container}" "${BASE_NAME}" >/dev/null
    trap - EXIT
    say "base image: imported ${BASE_NAME} in $(seconds_since "${started}") s"
fi

if [[ "${PREPARE_ONLY}" == 1 ]]; then
    say "prepared (no build: --prepare)"
    exit 0
fi

# --- the image -------------------------------------------------------------------------------------------------------
# --pull-never: the base must be the local one (nothing to pull from anyway). --isolation chroot: RUN steps need
# no OCI runtime or namespaces beyond what root has here. The host's trust store is mounted for the RUN steps, so
# pip reaches the package index exactly as the host's pip does (whatever CA this network's proxy presents).
started=$(date +%s)
buildah bud --pull-never --isolation chroot --format docker \
    --volume /etc/ssl/certs:/etc/ssl/certs:ro \
    --tag "${TAG}" --file "${REPO_ROOT}/Dockerfile" "${REPO_ROOT}"
say "built ${TAG} in $(seconds_since "${started}") s"
# A rebuild leaves the previous image of TAG untagged: drop those (best effort: an image that a running test's
# container still uses stays until the next run).
buildah rmi --prune >/dev/null 2>&1 || true
