#!/usr/bin/env bash
# Make sure kcat (librdkafka's command-line client) is on PATH: the Kafka-client interop tests
# (tests/test_kafka_clients.py) run the real binary. Installs Debian's package when it is missing.
set -euo pipefail
if command -v kcat >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "kcat not found: installing Debian's kcat" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
  fi
  exit 0
fi
echo "The Kafka-client tests need kcat on PATH. Install it, e.g. 'sudo apt-get install kcat'." >&2
exit 1
