"""TLS on the broker (issue 22): listeners with Kafka's names and Metadata per listener, SSL with client
certificates (principal User:<subject>), fetches larger than the sendfile threshold over TLS, and the bad
inputs: plaintext bytes to a TLS port, a TLS hello to a plaintext port, a certificate from an unknown CA
and an expired certificate with ssl.client.auth=required — each refused while the broker serves others."""

from __future__ import annotations

import socket
import ssl
import time
import uuid

import pytest
from support.brokers import broker_process
from support.secure import (
    add_users_offline,
    broker_properties,
    ck_config,
    make_pki,
    sasl_options,
    write_properties,
)

from pyspark_logsource.broker.config import BrokerConfig
from pyspark_logsource.broker.security.tls import subject_name
from pyspark_logsource.broker.server import SENDFILE_MIN_BYTES
from pyspark_logsource.client import Admin, Consumer, Producer
from pyspark_logsource.errors import ConfigError, NetworkError
from pyspark_logsource.protocol import ClientConnection
from pyspark_logsource.protocol.messages import ApiVersionsRequest, MetadataRequest

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.kafka_clients


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure(tmp_path_factory, pki):
    d = tmp_path_factory.mktemp("tls-broker")
    props = broker_properties(d, pki)
    add_users_offline(write_properties(d / "server.properties", props), d)
    props.pop("log.dirs")
    with broker_process(d, config=props) as b:
        yield b


def _ssl_options(pki, cert=None) -> dict:
    opts = {"security_protocol": "SSL", "ssl_cafile": str(pki.ca)}
    if cert is not None:
        opts["ssl_certfile"] = str(cert)
    return opts


def _audited(secure, reason: str | None = None):
    """The count of failed-TLS-handshake audit lines with ``reason`` (all reasons: a dict of counts)."""
    lines = [
        x
        for x in secure.log_file.read_text().splitlines()
        if "mechanism=TLS listener=SSL: TLS handshake failed" in x
    ]
    counts: dict[str, int] = {}
    for x in lines:
        r = x.rsplit("(", 1)[1].rstrip(")")
        counts[r] = counts.get(r, 0) + 1
    return counts if reason is None else counts.get(reason, 0)


def _served(secure, pki) -> None:
    """The broker still answers a good client on its TLS and plaintext listeners."""
    with Admin(secure.bootstrap_on("SSL"), **_ssl_options(pki, pki.alice_cert)) as a:
        a.list_topics()
    with Admin(secure.bootstrap_on("PLAINTEXT")) as a:
        a.list_topics()


def test_listener_settings_are_validated():
    ok = BrokerConfig.from_properties(
        {
            "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://0.0.0.0:0",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
            "advertised.listeners": "EXTERNAL://broker.example.com:9093",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert [(x.name, x.protocol) for x in ok.listeners.listeners] == [
        ("INTERNAL", "PLAINTEXT"),
        ("EXTERNAL", "SASL_PLAINTEXT"),
    ]
    assert ok.listeners.advertised == {"EXTERNAL": ("broker.example.com", 9093)}
    assert ok.listeners.inter_broker == "INTERNAL"
    assert BrokerConfig.from_properties({}).listeners.listeners[0].protocol == "PLAINTEXT"  # the default
    bad = [
        ({"listeners": "X://h:1", "listener.security.protocol.map": "X:TLS"}, "protocols are"),
        ({"listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, "twice"),
        ({"listeners": "SSL://h:1", "ssl.keystore.location": "k", "ssl.keystore.type": "JKS"}, "use PEM"),
        (
            {"listeners": "SSL://h:1", "ssl.keystore.location": "k", "ssl.client.auth": "maybe"},
            "ssl.client.auth",
        ),
        (
            {"listeners": "SSL://h:1", "ssl.keystore.location": "k", "ssl.enabled.protocols": "SSLv3"},
            "TLSv1.2",
        ),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "implements PLAIN"),
        (
            {"listeners": "SSL://h:1", "ssl.keystore.location": "k", "ssl.client.auth": "required"},
            "truststore",
        ),
    ]
    for props, match in bad:
        with pytest.raises(ConfigError, match=match):
            BrokerConfig.from_properties(props)


def test_keystore_that_does_not_load_is_a_clear_error(tmp_path):
    from pyspark_logsource.broker.security.tls import server_context

    (tmp_path / "bad.pem").write_text("not a pem")
    cfg = BrokerConfig.from_properties(
        {"listeners": "SSL://h:1", "ssl.keystore.location": str(tmp_path / "bad.pem")}
    )
    with pytest.raises(ConfigError, match="ssl.keystore.location .*cannot load"):
        server_context(cfg.security)


def test_subject_is_rfc2253_most_specific_first():
    cert = {
        "subject": (
            (("organizationName", "example"),),
            (("organizationalUnitName", "eng"),),
            (("commonName", "a,b"),),
        )
    }
    assert subject_name(cert) == "CN=a\\,b,OU=eng,O=example"


def test_metadata_answers_the_listener_the_client_came_in_on(secure, pki):
    for name, opts in (
        ("PLAINTEXT", {}),
        ("SSL", _ssl_options(pki, pki.alice_cert)),
        ("SASL_SSL", sasl_options(pki, "SCRAM-SHA-256")),
    ):
        with Admin(secure.bootstrap_on(name), **opts) as a:
            brokers = a._client.request(MetadataRequest(None)).brokers
            assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", secure.listener_ports[name])]


def test_confluent_kafka_over_ssl_with_client_certificate(secure, pki):
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    conf = ck_config(secure.bootstrap_on("SSL"), pki, "SSL")
    conf.update({"ssl.certificate.location": str(pki.alice_cert), "ssl.key.location": str(pki.alice_cert)})
    p = ck.Producer(conf)
    for i in range(5):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(30) == 0
    c = ck.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(5)]
    assert (
        "on listener SSL presented a certificate: principal User:CN=alice,OU=eng,O=example"
        in secure.log_file.read_text()
    )


def test_large_fetches_over_tls_use_the_write_path(secure, pki):
    """Fetched regions over the sendfile threshold must still go through TLS (no sendfile on TLS)."""
    topic = f"big-{uuid.uuid4().hex[:8]}"
    value = b"x" * 20_000
    n = 4 * SENDFILE_MIN_BYTES // len(value) + 10
    opts = _ssl_options(pki, pki.alice_cert)
    p = Producer(secure.bootstrap_on("SSL"), batch_size=256 * 1024, linger_ms=20, **opts)
    for _ in range(n):
        p.send(topic, value, partition=0)
    p.flush()
    p.close()
    for bootstrap, o in (
        (secure.bootstrap_on("SSL"), opts),
        (secure.bootstrap_on("SASL_SSL"), sasl_options(pki, "SCRAM-SHA-512")),
    ):
        c = Consumer(bootstrap, group_id=None, max_partition_fetch_bytes=8 * SENDFILE_MIN_BYTES, **o)
        c.assign([(topic, 0)])
        got, deadline = 0, time.monotonic() + 30
        while got < n and time.monotonic() < deadline:
            for m in c.poll(0.5):
                assert m.value == value
                got += 1
        c.close()
        assert got == n


def test_plaintext_bytes_to_a_tls_port_are_refused(secure, pki):
    s = socket.create_connection(("127.0.0.1", secure.listener_ports["SSL"]), timeout=10)
    _, parts = ClientConnection("plain").send_request(ApiVersionsRequest())
    s.sendall(b"".join(bytes(x) for x in parts))
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    s.close()
    # closed, with a TLS alert record (content type 21) at most: never a Kafka answer
    assert data == b"" or data[0] == 21, data[:16]
    time.sleep(0.2)
    assert _audited(secure, "WRONG_VERSION_NUMBER") >= 1
    _served(secure, pki)


def test_tls_hello_to_a_plaintext_port_is_refused(secure, pki):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with socket.create_connection(("127.0.0.1", secure.listener_ports["PLAINTEXT"]), timeout=10) as raw:
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    with pytest.raises(NetworkError, match="TLS handshake .* failed"):
        Admin(secure.bootstrap_on("PLAINTEXT"), **_ssl_options(pki, pki.alice_cert)).list_topics()
    _served(secure, pki)


@pytest.mark.parametrize("which", ["unknown-ca", "expired", "none"])
def test_bad_client_certificate_is_refused_when_required(secure, pki, which):
    cert = {"unknown-ca": pki.stranger_cert, "expired": pki.expired_cert, "none": None}[which]
    before = _audited(secure)
    with pytest.raises(NetworkError):
        with Admin(secure.bootstrap_on("SSL"), **_ssl_options(pki, cert)) as a:
            a.list_topics()
    reason = {"unknown-ca": "CERTIFICATE_VERIFY_FAILED", "expired": "CERTIFICATE_VERIFY_FAILED"}.get(
        which, "PEER_DID_NOT_RETURN_A_CERTIFICATE"
    )
    deadline = time.monotonic() + 5
    while _audited(secure, reason) <= before.get(reason, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _audited(secure, reason) > before.get(reason, 0)
    _served(secure, pki)


def test_untrusted_broker_certificate_is_a_clear_client_error(secure):
    with pytest.raises(NetworkError, match="not trusted.*ssl_cafile"):
        Admin(secure.bootstrap_on("SSL"), security_protocol="SSL").list_topics()


def test_client_options_are_validated(pki):
    with pytest.raises(TypeError, match="sasl_passwd"):
        Admin("127.0.0.1:1", sasl_passwd="x")
    with pytest.raises(ConfigError, match="security_protocol"):
        Admin("127.0.0.1:1", security_protocol="TLS")
    with pytest.raises(ConfigError, match="sasl_plain_username"):
        Admin("127.0.0.1:1", security_protocol="SASL_SSL", sasl_mechanism="PLAIN")


def test_enabled_protocols_and_cipher_suites_shape_the_context(pki):
    import ssl as _ssl

    from pyspark_logsource.broker.security.tls import server_context

    base = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.keystore)}
    ctx = server_context(BrokerConfig.from_properties({**base, "ssl.enabled.protocols": "TLSv1.3"}).security)
    assert ctx.minimum_version == ctx.maximum_version == _ssl.TLSVersion.TLSv1_3
    ctx = server_context(
        BrokerConfig.from_properties({**base, "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"}).security
    )
    assert {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"} == {
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    }
    with pytest.raises(ConfigError, match="ssl.cipher.suites"):
        server_context(BrokerConfig.from_properties({**base, "ssl.cipher.suites": "NO-SUCH-CIPHER"}).security)
