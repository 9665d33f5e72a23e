#!/usr/bin/env bash
# Make sure Apache ZooKeeper's server jar is installed: cluster mode (brokers coordinated through
# ZooKeeper) and its tests (tests/test_cluster_*.py, tests/test_replication_matrix.py) and
# `logsource cluster start` run a real ZooKeeper from /usr/share/java/zookeeper.jar (Debian's
# `zookeeper` package, 3.8). Installs the package when the jar is missing; nothing is started.
set -euo pipefail
JAR=/usr/share/java/zookeeper.jar
if [ -f "$JAR" ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ZooKeeper not found ($JAR): installing Debian's zookeeper" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
  fi
  # the package's init scripts must not run a system-wide server on 2181: tests start their own
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet zookeeper 2>/dev/null; then
    systemctl stop zookeeper || true
  fi
  exit 0
fi
echo "Cluster mode needs ZooKeeper ($JAR). Install it, e.g. 'sudo apt-get install zookeeper'." >&2
exit 1
