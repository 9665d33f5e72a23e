#!/usr/bin/env bash
# librdkafka's own test suite (v2.15.0) against a logsource broker or a local 3-broker cluster.
#
#   scripts/librdkafka_suite.sh single            # one broker (default)
#   scripts/librdkafka_suite.sh cluster           # ZooKeeper + 3 brokers (logsource cluster start)
#
# Environment:
#   LRK_SRC             librdkafka source tree (default /tmp/librdkafka-2.15.0; cloned if missing)
#   TEST_KAFKA_VERSION  Kafka version the suite gates tests on (default 2.8.0: our ApiVersions tops out
#                       at Fetch v12 / Produce v9 / Metadata v12, i.e. Kafka 2.8's surface)
#   TESTS               substring of the tests to run (default: all)
#   TESTS_SKIP          comma-separated tests to skip (default: $DEFAULT_SKIP below, see README)
#   PARALLEL            tests run at once (default 2), QUICK=1 (default) runs the suite's quick mode (-Q)
#   TIMEOUT_MULT        test.timeout.multiplier in test.conf (default 4: a loaded 2-core machine)
#   OUT                 where the log and the summary go (default /tmp/lrk-suite-<mode>)
#   KEEP_DATA=1         keep the broker(s) data directory (and their logs) after the run
#   ALONE               tests run by themselves after the parallel run (default $DEFAULT_ALONE below;
#                       set but empty: none), their output in OUT/suite-alone.log
#   KAFKA_PATH          a Kafka directory with bin/ (default OUT/kafka, made by scripts/kafka_bin.sh from the
#                       jars `make peers` fetched): 0052, 0077, 0081, 0109, 0115 and 0119 run its
#                       kafka-topics.sh / kafka-acls.sh
#
# The broker runs with ACLs on and allow.everyone.if.no.acl.found=true, as the suite's CI (trivup) runs
# Kafka: nothing is refused until a test adds a deny rule (0109, 0115, 0119), and the ACL admin APIs
# (0081's CreateAcls) answer instead of SECURITY_DISABLED.
# Only the tests that need a broker run (-L); the mock-cluster/local ones test librdkafka alone. Topics
# are auto-created with 4 partitions, as in the suite's own CI (trivup); in cluster mode with three
# replicas and Kafka's default min.insync.replicas=1 (the suite creates replication-factor-1 topics and
# produces to them with acks=all, which min.insync.replicas=2 refuses, as Kafka would).
# The summary (test, result, duration, reason) is OUT/summary.txt. Not part of `make test`.
set -uo pipefail

MODE=${1:-single}
WT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-/work/main/.venv/bin/python}
LOGSOURCE=${LOGSOURCE:-$(dirname "$PY")/logsource}
LRK_SRC=${LRK_SRC:-/tmp/librdkafka-2.15.0}
LRK_TAG=${LRK_TAG:-v2.15.0}
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-2.8.0}
PARALLEL=${PARALLEL:-2}
QUICK=${QUICK:-1}
TIMEOUT_MULT=${TIMEOUT_MULT:-4}
OUT=${OUT:-/tmp/lrk-suite-$MODE}
# Skipped by default, each for a reason listed in README ("librdkafka's own test suite"): 0092 needs
# message format v1 (Produce v2), which Kafka 4.0 removed (KIP-896) and we never served. SASL/SSL/OAUTHBEARER
# tests skip themselves on a PLAINTEXT test.conf; share groups (0170-0190) are gated on Kafka 4.2;
# KIP-848 runs only with TEST_CONSUMER_GROUP_PROTOCOL=consumer.
# 0052_msg_timestamps: below Kafka 4.0 it also produces with api.version.request=false and
# broker.version.fallback=0.9.0 (message format v0, which Kafka 4.0 dropped too), which on a cluster never
# fails fast and runs into its timeout, which aborts the whole runner; its cases for Kafka 4.0+ pass:
# TEST_KAFKA_VERSION=4.0.0 TESTS=0052 TESTS_SKIP= (see README).
DEFAULT_SKIP="0092_mixed_msgver,0052_msg_timestamps"
export TESTS_SKIP=${TESTS_SKIP-$DEFAULT_SKIP}  # set but empty: skip nothing
# Run alone, never beside another test: 0076_produce_retry's interceptor close()s the producer's socket fd
# under librdkafka, which closes it again later. All tests are threads of one test-runner process, so
# in between the fd number goes to whatever a parallel test opens next (a new client's wake-up pipe:
# 0076 then logs "Receive failed: Socket operation on non-socket" and closes that pipe; a socket of the
# other client's that then gets the same number is drained as wake-up bytes, its answers lost). That is
# how 0077's GroupCoordinator ApiVersions "timed out after 10 s" in one full run: the broker had answered.
DEFAULT_ALONE="0076_produce_retry"
ALONE=${ALONE-$DEFAULT_ALONE}
export PYTHONPATH=$WT${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"

# 1. Source: a clone of the tag (or an unpacked tarball / fetched snapshot already at LRK_SRC).
if [ ! -f "$LRK_SRC/tests/test.c" ]; then
    git clone --depth 1 --branch "$LRK_TAG" https://github.com/confluentinc/librdkafka "$LRK_SRC" || {
        echo "cannot get librdkafka $LRK_TAG: put its source at LRK_SRC=$LRK_SRC" >&2
        exit 2
    }
fi

# 2. Build: the C/C++ libraries and the test runner only (no SSL/SASL/GSSAPI/curl; lz4 bundled).
if [ ! -x "$LRK_SRC/tests/test-runner" ]; then
    (cd "$LRK_SRC" && ./configure --disable-ssl --disable-gssapi --disable-curl --disable-zstd \
        >"$OUT/configure.out" 2>&1 && make -j2 libs >"$OUT/make.out" 2>&1 &&
        make -C tests -j2 build >>"$OUT/make.out" 2>&1) || {
        echo "build failed: see $OUT/configure.out, $OUT/make.out" >&2
        exit 2
    }
fi

# 2b. Kafka's bin/ scripts, run by the tests that shell out to them (test.c's test_kafka_cmd/_topics).
if [ -z "${KAFKA_PATH:-}" ]; then
    if KAFKA_PATH=$("$WT/scripts/kafka_bin.sh" "$OUT/kafka"); then
        export KAFKA_PATH
    else
        unset KAFKA_PATH
        echo "no KAFKA_PATH: the tests that run Kafka's bin/ scripts will fail (make peers)" >&2
    fi
fi
ACLS=(-o authorizer.class.name=kafka.security.authorizer.AclAuthorizer -o allow.everyone.if.no.acl.found=true)

# 3. A broker or a cluster, in a fresh data directory.
DATA=$(mktemp -d /tmp/lrk-data-XXXXXX)
BROKER_PID=
cleanup() {
    if [ "$MODE" = cluster ]; then
        "$LOGSOURCE" cluster stop --data-dir "$DATA" >/dev/null 2>&1
    elif [ -n "$BROKER_PID" ]; then
        kill "$BROKER_PID" 2>/dev/null
        wait "$BROKER_PID" 2>/dev/null
    fi
    [ -n "${KEEP_DATA:-}" ] && echo "data kept in $DATA" >&2 || rm -rf "$DATA"
}
trap cleanup EXIT

if [ "$MODE" = cluster ]; then
    BOOTSTRAP=$("$LOGSOURCE" cluster start --brokers 3 --data-dir "$DATA" \
        -o auto.create.topics.enable=true -o num.partitions=4 \
        -o min.insync.replicas=1 "${ACLS[@]}" |
        sed -n 's/^bootstrap.servers=//p')
else
    rm -f "$OUT/broker.log" # a previous run's "listening on" line must not be read as this one's
    "$LOGSOURCE" broker --config "$WT/conf/server.properties" \
        -o listeners=PLAINTEXT://127.0.0.1:0 -o "log.dirs=$DATA/logs" -o num.partitions=4 \
        -o offsets.topic.replication.factor=1 -o transaction.state.log.replication.factor=1 \
        -o transaction.state.log.min.isr=1 -o metrics.listener= "${ACLS[@]}" \
        >"$OUT/broker.log" 2>&1 &
    BROKER_PID=$!
    for _ in $(seq 1 300); do
        BOOTSTRAP=$(grep -o 'listening on [0-9.]*:[0-9]*' "$OUT/broker.log" | head -1 | sed 's/listening on //')
        [ -n "$BOOTSTRAP" ] && break
        sleep 0.2
    done
fi
if [ -z "${BOOTSTRAP:-}" ]; then
    echo "the broker did not start (see $OUT/broker.log or $DATA)" >&2
    exit 2
fi
echo "bootstrap.servers=$BOOTSTRAP  TEST_KAFKA_VERSION=$TEST_KAFKA_VERSION  TESTS_SKIP=$TESTS_SKIP" | tee "$OUT/run.txt"
# test.c passes BROKERS to kafka-topics.sh --bootstrap-server, or below 3.0 ZK_ADDRESS to --zookeeper, which
# our kafka-topics.sh turns into --bootstrap-server (Kafka 4's tools have no ZooKeeper mode)
export BROKERS=$BOOTSTRAP ZK_ADDRESS=$BOOTSTRAP

# 4. test.conf and the run.
cat >"$OUT/test.conf" <<EOF
bootstrap.servers=$BOOTSTRAP
test.timeout.multiplier=$TIMEOUT_MULT
EOF
ARGS="-L -p$PARALLEL"
[ "$QUICK" = 1 ] && ARGS="$ARGS -Q"
runner() { # runner LOG ARGS...: one test-runner process (TESTS, TESTS_SKIP from the environment)
    local log=$1
    shift
    (cd "$LRK_SRC/tests" && RDKAFKA_TEST_CONF="$OUT/test.conf" RDKAFKA_GITVER="$LRK_TAG" \
        LD_LIBRARY_PATH=../src:../src-cpp ./test-runner "$@" >"$log" 2>&1)
}
table() { # the suite's own table in a log, ANSI colours stripped: test, result, duration, reason
    sed 's/\x1b\[[0-9;]*m//g' "$1" |
        grep -E '^\| *[0-9]{4}_[^|]*\|[^|]*(PASSED|FAILED|SKIPPED|RUNNING|NOT_STARTED)' |
        sed -E 's/^\| *//; s/ *\| */\t/g'
}
# the ALONE tests that this run selects (TESTS, TESTS_SKIP match a test by its number, as test.c does)
SOLO=()
for t in ${ALONE//,/ }; do
    n=${t:0:4}
    [[ -n "${TESTS:-}" && "$TESTS" != *"$n"* ]] && continue
    [[ "$TESTS_SKIP" == *"$n"* ]] && continue
    SOLO+=("$t")
done
START=$(date +%s)
SKIP_MAIN=$TESTS_SKIP
[ ${#SOLO[@]} -gt 0 ] && SKIP_MAIN="$TESTS_SKIP${TESTS_SKIP:+,}$(IFS=,; echo "${SOLO[*]}")"
TESTS_SKIP=$SKIP_MAIN runner "$OUT/suite.log" $ARGS
RC=$?
rm -f "$OUT/suite-alone.log"
for t in "${SOLO[@]}"; do # one at a time, in a process of its own
    TESTS=${t:0:4} runner "$OUT/suite-alone.$t.log" ${ARGS/-p$PARALLEL/-p1}
    r=$?
    cat "$OUT/suite-alone.$t.log" >>"$OUT/suite-alone.log" && rm -f "$OUT/suite-alone.$t.log"
    [ $RC -eq 0 ] && RC=$r
done
echo "runtime: $(($(date +%s) - START)) s, test-runner exit $RC" | tee -a "$OUT/run.txt"

# 5. Summary: the suite's own table; an ALONE test's row from its own run.
table "$OUT/suite.log" >"$OUT/summary.txt"
if [ ${#SOLO[@]} -gt 0 ]; then
    solo_re="^($(for t in "${SOLO[@]}"; do printf '%s|' "${t:0:4}"; done | sed 's/|$//'))_" # its number's rows
    table "$OUT/suite-alone.log" | grep -E "$solo_re" >"$OUT/summary.alone"
    grep -vE "$solo_re" "$OUT/summary.txt" | cat - "$OUT/summary.alone" | LC_ALL=C sort -o "$OUT/summary.txt"
    rm -f "$OUT/summary.alone"
fi
for s in PASSED FAILED SKIPPED; do
    printf '%s %s\n' "$s" "$(awk -F'\t' -v s=$s '$2 == s' "$OUT/summary.txt" | wc -l)"
done | tee -a "$OUT/run.txt"
awk -F'\t' '$2 != "PASSED"' "$OUT/summary.txt"
exit $RC
