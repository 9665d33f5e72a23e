#!/usr/bin/env bash
# Kafka's bin/ layout, made from the jars scripts/peers.py fetched (`make peers`), for programs that run
# Kafka's shell scripts from a Kafka directory: librdkafka's test suite runs $KAFKA_PATH/bin/kafka-acls.sh
# and kafka-topics.sh (scripts/librdkafka_suite.sh sets KAFKA_PATH to DIR).
#
#   scripts/kafka_bin.sh DIR      # writes DIR/bin/kafka-run-class.sh and the tool scripts below
#
# Maven Central has Kafka's jars, not its distribution: each script here runs the tool's main class on the
# fetched classpath, as Kafka's own kafka-run-class.sh does. One difference, in kafka-topics.sh: a caller
# that believes the broker is older than Kafka 3.0 (librdkafka's suite with TEST_KAFKA_VERSION=2.8.0) passes
# `--zookeeper HOST:PORT`, which Kafka 4's TopicCommand no longer has; the script passes it on as
# `--bootstrap-server HOST:PORT` (the caller is told to point ZK_ADDRESS at the brokers).
set -euo pipefail

DIR=${1:?usage: scripts/kafka_bin.sh DIR}
WT=$(cd "$(dirname "$0")/.." && pwd)
CP=$(python3 "$WT/scripts/peers.py" classpath kafka) || {
    echo "Apache Kafka's jars are not fetched: run 'make peers'" >&2
    exit 2
}
mkdir -p "$DIR/bin" "$DIR/config"
DIR=$(cd "$DIR" && pwd)

cat >"$DIR/config/tools-log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_ERR
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
EOF

# Kafka's kafka-run-class.sh: a main class and its arguments; KAFKA_HEAP_OPTS / KAFKA_OPTS as Kafka's.
# C1 only (-XX:TieredStopAtLevel=1): a tool runs for seconds, where the JIT's second tier never pays.
cat >"$DIR/bin/kafka-run-class.sh" <<EOF
#!/usr/bin/env bash
exec java \${KAFKA_HEAP_OPTS:--Xmx256m} -XX:TieredStopAtLevel=1 \${KAFKA_OPTS:-} \\
    -Dlog4j2.configurationFile=$DIR/config/tools-log4j2.properties -cp '$CP' "\$@"
EOF

tool() { # script name, main class
    printf '#!/usr/bin/env bash\nexec "$(dirname "$0")/kafka-run-class.sh" %s "$@"\n' "$2" >"$DIR/bin/$1"
}
tool kafka-acls.sh org.apache.kafka.tools.AclCommand
tool kafka-configs.sh kafka.admin.ConfigCommand
tool kafka-transactions.sh org.apache.kafka.tools.TransactionsCommand
tool kafka-consumer-groups.sh org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
tool kafka-console-producer.sh org.apache.kafka.tools.ConsoleProducer
tool kafka-console-consumer.sh org.apache.kafka.tools.consumer.ConsoleConsumer
tool kafka-delete-records.sh org.apache.kafka.tools.DeleteRecordsCommand
tool kafka-leader-election.sh org.apache.kafka.tools.LeaderElectionCommand
tool kafka-reassign-partitions.sh org.apache.kafka.tools.reassign.ReassignPartitionsCommand

cat >"$DIR/bin/kafka-topics.sh" <<'EOF'
#!/usr/bin/env bash
# Kafka 4's TopicCommand has no --zookeeper: a pre-3.0 caller's --zookeeper names the brokers here
args=()
for a in "$@"; do
    [ "$a" = --zookeeper ] && a=--bootstrap-server
    args+=("$a")
done
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "${args[@]}"
EOF
chmod +x "$DIR"/bin/*.sh
echo "$DIR"
