#!/usr/bin/env bash
# Install a Debian package that ships a service, without ever running that service, for the integration tests.
#
#   bash scripts/apt-install-service.sh PACKAGE SERVICE [INSTALLED_BINARY...]
#
# Installs PACKAGE (no recommends) unless every INSTALLED_BINARY is already executable; while it installs, a
# policy-rc.d that exits 101 keeps the package's postinst from starting SERVICE (no init here, or an unwanted
# instance on its port where there is one). Then, installed now or before, SERVICE is stopped and disabled: the
# tests start their own instances on free loopback ports.
set -euo pipefail

PACKAGE=$1
SERVICE=$2
shift 2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

installed=1
for bin in "$@"; do
  [ -x "$bin" ] || installed=0
done
if [ "$installed" = 1 ] && [ "$#" -gt 0 ]; then
  echo "$PACKAGE already installed: $("$1" --version 2>&1 | head -n 1)"
else
  export DEBIAN_FRONTEND=noninteractive
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    created_policy=1
  fi
  trap '[ "$created_policy" = 1 ] && $SUDO rm -f "$policy"' EXIT
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "$PACKAGE"
  if [ "$#" -gt 0 ]; then
    echo "installed: $("$1" --version 2>&1 | head -n 1)"
  fi
fi

# `systemctl disable` works without a running systemd (it only removes the wants/ symlink).
if command -v systemctl >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    $SUDO systemctl stop "$SERVICE" >/dev/null 2>&1 || true
  fi
  $SUDO systemctl disable "$SERVICE" >/dev/null 2>&1 || true
fi
if [ -x "/etc/init.d/$SERVICE" ]; then
  $SUDO "/etc/init.d/$SERVICE" stop >/dev/null 2>&1 || true
  if command -v update-rc.d >/dev/null 2>&1; then
    $SUDO update-rc.d "$SERVICE" disable >/dev/null 2>&1 || true
  fi
fi
echo "packaged $SERVICE service stopped and disabled (tests start their own)"
