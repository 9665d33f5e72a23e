"""The real peers the tests and benchmarks run against, fetched with Maven into a git-ignored cache.

``python scripts/peers.py fetch`` (``make peers``; ``make test`` depends on it) resolves each artifact with
its runtime dependencies into ``.cache/peers/<artifact>-<version>/`` (a generated pom and
``mvn dependency:copy-dependencies``; Maven's own ``~/.m2`` keeps the downloads). A directory holding its
``.complete`` stamp is done: a second run costs no Maven call. Installs Debian's ``maven`` when ``mvn`` is
missing (as root), like scripts/ensure-kcat.sh does for kcat. A failed download prints one line naming the
artifact and what to do, and exits 1.

``python scripts/peers.py classpath kafka`` prints a peer's classpath (for ``java -cp``).
Tests and benchmarks import this file (``tests/support/kafka_peer.py`` loads it by path): ``peer_dir``,
``classpath``, ``spark_kafka_jars``. Standard library only: it runs before the venv exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("LOGSOURCE_PEERS_CACHE", ROOT / ".cache" / "peers"))
STAMP = ".complete"


@dataclass(frozen=True)
class Peer:
    """One thing to fetch: Maven coordinates (each with its runtime dependencies) under one name."""

    name: str
    version: str
    artifacts: tuple[str, ...]  # group:artifact (at the peer's version) or group:artifact:version
    why: str

    @property
    def dir(self) -> Path:
        return CACHE / f"{self.name}-{self.version}"


#: Apache Kafka: the broker (kafka.Kafka, KRaft mode) and the tools (org.apache.kafka.tools.*).
KAFKA_VERSION = "4.3.1"
#: Spark's Kafka connector: the installed pyspark is 4.3.0, whose connector Maven Central does not serve
#: (its newest is 4.2.0); 4.2.0 is the nearest, and the tests show it runs on Spark 4.3.0.
SPARK_VERSION = "4.2.0"
#: hadoop-client-minicluster at the version of the hadoop-client-api jar pyspark ships.
HADOOP_VERSION = "3.5.0"

PEERS = {
    p.name: p
    for p in (
        Peer(
            "kafka",
            KAFKA_VERSION,
            (
                "org.apache.kafka:kafka_2.13",
                "org.apache.kafka:kafka-tools",
                # Kafka logs through SLF4J and ships log4j2 without the binding: the distribution adds
                # it; without it the broker's log (the fixture's error message) would be empty
                "org.slf4j:slf4j-api:2.0.17",
                "org.apache.logging.log4j:log4j-slf4j2-impl:2.25.4",
            ),
            "Apache Kafka broker (KRaft) and its command-line tools",
        ),
        Peer(
            "spark-sql-kafka",
            SPARK_VERSION,
            ("org.apache.spark:spark-sql-kafka-0-10_2.13",),
            "Spark's own Kafka connector (format('kafka'))",
        ),
        Peer(
            "hadoop-minicluster",
            HADOOP_VERSION,
            (
                "org.apache.hadoop:hadoop-client-minicluster",
                # MiniDFSClusterManager (the minicluster's command line) loads JUnit's assertions
                "org.junit.jupiter:junit-jupiter-api:5.11.4",
                "junit:junit:4.13.2",
            ),
            "Hadoop's MiniDFSCluster (hdfs:// tests)",
        ),
    )
}

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pyspark-logsource.peers</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""

DEP = """    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>"""


def ensure_maven() -> str:
    """Path of ``mvn``; installs Debian's maven package when it is missing and we are root."""
    mvn = shutil.which("mvn")
    if mvn:
        return mvn
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("mvn not found: installing Debian's maven", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-qq", "maven"]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
            subprocess.run(cmd, env=env, capture_output=True, check=False)
        mvn = shutil.which("mvn")
        if mvn:
            return mvn
    raise SystemExit(
        "peers: Maven (mvn) is missing: install it, e.g. 'sudo apt-get install maven', then 'make peers'"
    )


def fetch(peer: Peer, mvn: str) -> None:
    """Resolve ``peer`` with its runtime dependencies into ``peer.dir`` unless it is already there."""
    coords = ", ".join(a if a.count(":") == 2 else f"{a}:{peer.version}" for a in peer.artifacts)
    stamp = peer.dir / STAMP
    if stamp.exists() and stamp.read_text().strip() == coords:
        return  # fetched before, with the same list of artifacts
    print(f"peers: fetching {coords} with Maven into {peer.dir}", file=sys.stderr)
    deps = "\n".join(
        DEP.format(group=g, artifact=a, version=v[0] if v else peer.version)
        for g, a, *v in (c.split(":") for c in peer.artifacts)
    )
    partial = peer.dir.with_name(peer.dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="peers-pom-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(POM.format(name=peer.name, deps=deps))
        cmd = [
            mvn,
            "-B",
            "-q",
            "-Dstyle.color=never",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "[ERROR]" in ln]
        detail = lines[0].replace("[ERROR]", "").strip()[:300] if lines else f"mvn exit {proc.returncode}"
        raise SystemExit(
            f"peers: could not download {coords} ({peer.why}) from Maven Central: {detail}. "
            f"Check the network or proxy (~/.m2/settings.xml), then run 'make peers' again."
        )
    (partial / STAMP).write_text(coords + "\n")
    shutil.rmtree(peer.dir, ignore_errors=True)
    partial.rename(peer.dir)


def peer_dir(name: str) -> Path | None:
    """The fetched directory of peer ``name``, or None when it has not been fetched."""
    d = PEERS[name].dir
    return d if (d / STAMP).exists() else None


def classpath(name: str) -> str | None:
    """``java -cp`` for peer ``name`` (all its jars), or None when it has not been fetched."""
    d = peer_dir(name)
    return None if d is None else os.pathsep.join(str(j) for j in sorted(d.glob("*.jar")))


def spark_kafka_jars(spark_jars_dir: str | Path) -> list[str]:
    """The connector's jars for ``spark.jars``: those pyspark does not ship already (kafka-clients,
    commons-pool2, spark-token-provider and the connector); empty when it has not been fetched."""
    d = peer_dir("spark-sql-kafka")
    if d is None:
        return []
    shipped = {_artifact_name(j.name) for j in Path(spark_jars_dir).glob("*.jar")}
    return [str(j) for j in sorted(d.glob("*.jar")) if _artifact_name(j.name) not in shipped]


def _artifact_name(jar: str) -> str:
    """``kafka-clients-4.1.0.jar`` -> ``kafka-clients``: the name up to the first dash before a digit."""
    parts = jar[: -len(".jar")].split("-")
    for i, part in enumerate(parts):
        if i and part[:1].isdigit():
            return "-".join(parts[:i])
    return "-".join(parts)


def main(argv: list[str]) -> int:
    if argv[:1] == ["fetch"]:
        names = argv[1:] or list(PEERS)
        mvn = ensure_maven()
        for name in names:
            fetch(PEERS[name], mvn)
        return 0
    if argv[:1] == ["classpath"] and len(argv) == 2:
        cp = classpath(argv[1])
        if cp is None:
            print(f"peers: {argv[1]} is not fetched: run 'make peers'", file=sys.stderr)
            return 1
        print(cp)
        return 0
    print(
        "usage: peers.py fetch [NAME...] | classpath NAME   (names: " + ", ".join(PEERS) + ")",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
