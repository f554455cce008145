#!/usr/bin/env bash
# Install Prometheus (Debian package `prometheus`, which also ships `promtool`) for the integration tests
# and for validating deploy/prometheus/*.yml and deploy/compose/prometheus.yml.
#
# Idempotent: does nothing when /usr/bin/prometheus and /usr/bin/promtool already exist. The tests start
# their own instance on a free loopback port (tests/integration/test_prometheus_scrape.py), so the Debian
# service is stopped and disabled here: it is not needed and would hold port 9090.
set -euo pipefail

BIN=/usr/bin/prometheus
PROMTOOL=/usr/bin/promtool
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

if [ -x "$BIN" ] && [ -x "$PROMTOOL" ]; then
  echo "prometheus already installed: $("$BIN" --version 2>&1 | head -n 1)"
else
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d exit 101 keeps the package's postinst from starting the service (no init here, or
  # an unwanted instance on :9090 where there is one); removed again whatever happens.
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    created_policy=1
  fi
  trap '[ "$created_policy" = 1 ] && $SUDO rm -f "$policy"' EXIT
  $SUDO apt-get update
  # --no-install-recommends: skips prometheus-node-exporter and friends (more services we do not want)
  $SUDO apt-get install -y --no-install-recommends prometheus
  echo "installed: $("$BIN" --version 2>&1 | head -n 1)"
fi

# Make sure the packaged service is not running and does not start at boot (the tests run their own).
# `systemctl disable` works without a running systemd (it only removes the wants/ symlink).
if command -v systemctl >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    $SUDO systemctl stop prometheus >/dev/null 2>&1 || true
  fi
  $SUDO systemctl disable prometheus >/dev/null 2>&1 || true
fi
if [ -x /etc/init.d/prometheus ]; then
  $SUDO /etc/init.d/prometheus stop >/dev/null 2>&1 || true
  if command -v update-rc.d >/dev/null 2>&1; then
    $SUDO update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
fi
echo "packaged prometheus service stopped and disabled (tests start their own)"
