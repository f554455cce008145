#!/usr/bin/env bash
# Install Prometheus Alertmanager (Debian package `prometheus-alertmanager`) for the integration tests.
#
# Idempotent: does nothing when /usr/bin/prometheus-alertmanager already exists. The tests start
# their own instance on a free loopback port (tests/integration/alertmanager_service.py), so the
# Debian service is stopped and disabled: it is not needed and would hold port 9093.
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-service.sh" prometheus-alertmanager prometheus-alertmanager \
  /usr/bin/prometheus-alertmanager
