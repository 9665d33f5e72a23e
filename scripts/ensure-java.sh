#!/usr/bin/env bash
# Make sure a Java runtime of version 17 or newer is on PATH (Spark 4 needs it).
set -euo pipefail
version() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}'; }
if command -v java >/dev/null 2>&1 && [ "$(version)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Java 17+ not found: installing Debian's openjdk-17-jre-headless" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "Spark needs Java 17 or newer on PATH. Install it, e.g. 'sudo apt-get install openjdk-17-jre-headless'." >&2
exit 1
