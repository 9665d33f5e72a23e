"""Every ``logsource`` command that talks to a broker takes ``--command-config client.properties`` with
Kafka's client keys (issue 22): each one, run as a subprocess, against a broker whose only listener is
SASL_SSL; a wrong password in the file is one clear line and exit status 1, never the password."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from support.secure import USERS, make_pki, sasl_ssl_acl_broker

from pyspark_logsource.client import Admin
from pyspark_logsource.errors import ConfigError

pytestmark = pytest.mark.kafka_clients

TOPIC = f"cc-{uuid.uuid4().hex[:8]}"
GROUP = f"cc-group-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory, pki):
    """A broker with one listener, SASL_SSL (no client certificates), and ACLs; admin is a super user."""
    with sasl_ssl_acl_broker(tmp_path_factory.mktemp("cc-broker"), pki) as b:
        yield b


def client_properties(path, pki, password: str):
    """Kafka's client.properties, as a Java client's user writes it (JAAS line, PEM trust store)."""
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="admin" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca}\n"
    )
    return path


@pytest.fixture(scope="module")
def props_file(tmp_path_factory, pki):
    return client_properties(tmp_path_factory.mktemp("cc") / "client.properties", pki, USERS["admin"])


def logsource(secured, props_file, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    b = ["--bootstrap-servers", secured.bootstrap_on("SASL_SSL"), "--command-config", str(props_file)]
    return subprocess.run(
        [sys.executable, "-m", "pyspark_logsource.cli", *argv, *b],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


#: (command line, what its output shows); in this order, each building on the ones before
COMMANDS = [
    (["topics", "create", TOPIC, "--partitions", "2"], TOPIC),
    (["topics", "list"], TOPIC),
    (["topics", "describe", TOPIC], TOPIC),
    (["topics", "alter", TOPIC, "--config", "retention.ms=86400000"], TOPIC),
    (["produce", TOPIC, "--partition", "0"], f"Produced 3 message(s) to {TOPIC}."),
    # from the beginning: a new group starts at the end (Kafka's default), where it waited out its timeout
    # for nothing; the three values produced above, in order, and the count
    (
        [
            "consume",
            TOPIC,
            "--group",
            GROUP,
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "20000",
        ],
        "a\nb\nc\nProcessed a total of 3 messages",
    ),
    (["groups", "list"], GROUP),
    (["groups", "describe", GROUP], GROUP),
    (["topics", "delete-records", TOPIC, "--partition", "0", "--before", "1"], TOPIC),
    (["transactions", "list"], ""),
    (["reassign", "list"], ""),
    (["users", "list"], "alice"),
    (["acls", "list"], ""),
]


@pytest.mark.parametrize(("argv", "shows"), COMMANDS, ids=[" ".join(a[:2]) for a, _ in COMMANDS])
def test_command_over_sasl_ssl_with_command_config(secured, props_file, argv, shows):
    r = logsource(secured, props_file, *argv, stdin="a\nb\nc\n")
    assert r.returncode == 0, r.stderr
    assert shows in r.stdout + r.stderr
    assert USERS["admin"] not in r.stdout + r.stderr


def test_without_command_config_the_commands_cannot_connect(secured):
    r = subprocess.run(
        [sys.executable, "-m", "pyspark_logsource.cli", "topics", "list", "--timeout", "3"]
        + ["--bootstrap-servers", secured.bootstrap_on("SASL_SSL")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1


@pytest.mark.parametrize(
    "argv",
    [["topics", "list"], ["produce", TOPIC], ["consume", TOPIC, "--max-messages", "1"], ["groups", "list"]],
    ids=lambda a: " ".join(a[:2]),
)
def test_wrong_password_is_one_clear_line(secured, pki, tmp_path, argv):
    wrong = "not-the-password-" + uuid.uuid4().hex[:6]
    bad = client_properties(tmp_path / "bad.properties", pki, wrong)
    r = logsource(secured, bad, *argv, stdin="x\n")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "SaslAuthenticationFailed" in lines[0] and "username or password" in lines[0]
    assert wrong not in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_command_config_errors_name_the_key_not_the_password(pki, tmp_path):
    from pyspark_logsource.cli_args import command_config_options

    jks = tmp_path / "jks.properties"
    jks.write_text("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n")
    with pytest.raises(ConfigError, match="keytool -importkeystore"):
        command_config_options(str(jks))
    no_user = tmp_path / "nouser.properties"
    no_user.write_text(
        "security.protocol=SASL_SSL\nsasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required password="hunter2-secret";\n'
    )
    with pytest.raises(ConfigError, match="username") as e:
        command_config_options(str(no_user))
    assert "hunter2-secret" not in str(e.value) and str(no_user) in str(e.value)
    bad_proto = tmp_path / "proto.properties"
    bad_proto.write_text("security.protocol=SASL_TLS\n")
    with pytest.raises(ConfigError, match="security_protocol must be one of"):
        Admin("127.0.0.1:1", **command_config_options(str(bad_proto)))


def test_pem_keystore_in_command_config_is_a_client_certificate(pki, tmp_path):
    from pyspark_logsource.cli_args import command_config_options

    f = tmp_path / "mtls.properties"
    f.write_text(f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={pki.alice_cert}\n")
    opts = command_config_options(str(f))
    # the key is read from the keystore's PEM file itself (ssl's load_cert_chain with no keyfile)
    assert opts["ssl_certfile"] == str(pki.alice_cert) and opts.get("ssl_keyfile") in (
        None,
        str(pki.alice_cert),
    )
