#!/usr/bin/env bash
# Install Prometheus (Debian package `prometheus`, which also ships `promtool`) for the integration tests
# and for validating deploy/prometheus/*.yml and deploy/compose/prometheus.yml.
#
# Idempotent: does nothing when /usr/bin/prometheus and /usr/bin/promtool already exist. The tests start
# their own instance on a free loopback port (tests/integration/test_prometheus_scrape.py), so the Debian
# service is stopped and disabled: it is not needed and would hold port 9090. No recommends: that skips
# prometheus-node-exporter and friends (more services we do not want).
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-service.sh" prometheus prometheus /usr/bin/prometheus /usr/bin/promtool
