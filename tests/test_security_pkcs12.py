"""PKCS12 key and trust stores on the broker (issue 22): ``ssl.keystore.type=PKCS12`` and
``ssl.truststore.type=PKCS12`` with their passwords, made with ``openssl pkcs12 -export`` as an operator
makes them; a broker serving TLS with client certificates from them; no key left on disk; a wrong
password, a store that is not PKCS12 and a JKS store each a clear ConfigError."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid

import pytest
from support.brokers import broker_process
from support.secure import make_pki

from pyspark_logsource.broker.config import BrokerConfig
from pyspark_logsource.broker.security.tls import server_context
from pyspark_logsource.client import Admin
from pyspark_logsource.errors import ConfigError

pytest.importorskip("cryptography")
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")

KS_PW, TS_PW = "keystore-pw-9", "truststore-pw-8"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """(pki, keystore.p12, truststore.p12): the broker's key and chain, and the CA, exported by openssl."""
    d = tmp_path_factory.mktemp("p12")
    pki = make_pki(d)
    ks, ts = d / "broker.p12", d / "trust.p12"
    subprocess.run(
        [
            "openssl",
            "pkcs12",
            "-export",
            "-in",
            str(pki.keystore),
            "-out",
            str(ks),
            "-passout",
            f"pass:{KS_PW}",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["openssl", "pkcs12", "-export", "-nokeys", "-in", str(pki.ca), "-out", str(ts)]
        + ["-passout", f"pass:{TS_PW}"],
        check=True,
        capture_output=True,
    )
    return pki, ks, ts


def props(ks, ts, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(ks),
        "ssl.keystore.password": KS_PW,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(ts),
        "ssl.truststore.password": TS_PW,
        "ssl.client.auth": "required",
        **extra,
    }


def test_broker_serves_tls_from_pkcs12_stores(stores, tmp_path):
    pki, ks, ts = stores
    with broker_process(tmp_path / "b", config=props(ks, ts)) as b:
        opts = {
            "security_protocol": "SSL",
            "ssl_cafile": str(pki.ca),
            "ssl_certfile": str(pki.alice_cert),  # trusted through the PKCS12 trust store
        }
        topic = f"p12-{uuid.uuid4().hex[:8]}"
        with Admin(b.bootstrap_on("SSL"), **opts) as admin:
            admin.create_topic(topic, 1)
            assert topic in admin.list_topics()
        stranger = {**opts, "ssl_certfile": str(pki.stranger_cert)}
        with pytest.raises(Exception):  # noqa: B017 (the handshake fails: NetworkError or ssl.SSLError)
            Admin(b.bootstrap_on("SSL"), request_timeout_ms=5000, **stranger).list_topics()
        log = b.log_file.read_text()
        assert "principal User:CN=alice,OU=eng,O=example" in log
        assert KS_PW not in log and TS_PW not in log


def test_pkcs12_leaves_no_key_on_disk(stores, tmp_path, monkeypatch):
    pki, ks, ts = stores
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    ctx = server_context(BrokerConfig.from_properties(props(ks, ts)).security)
    assert ctx.cert_store_stats()["x509_ca"] == 1  # the CA from the trust store
    assert list(spool.iterdir()) == []


def test_pkcs12_key_password_opens_the_keystore_when_no_keystore_password(stores):
    pki, ks, ts = stores
    p = props(ks, ts, **{"ssl.key.password": KS_PW})
    del p["ssl.keystore.password"]
    server_context(BrokerConfig.from_properties(p).security)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"ssl.keystore.password": "bad-pw-7x"},
            "ssl.keystore.location .*broker.p12: cannot open the PKCS12 store",
        ),
        (
            {"ssl.truststore.password": "bad-pw-7x"},
            "ssl.truststore.location .*trust.p12: cannot open the PKCS12",
        ),
        ({"ssl.truststore.location": "CA_PEM"}, "ssl.truststore.location .*ca.pem: cannot open the PKCS12"),
        ({"ssl.keystore.location": "/nonexistent/ks.p12"}, "ssl.keystore.location .*cannot read"),
    ],
    ids=["wrong-keystore-password", "wrong-truststore-password", "pem-as-pkcs12", "missing-file"],
)
def test_bad_pkcs12_store_is_a_clear_config_error(stores, change, match):
    pki, ks, ts = stores
    p = props(ks, ts, **{k: str(pki.ca) if v == "CA_PEM" else v for k, v in change.items()})
    with pytest.raises(ConfigError, match=match) as e:
        server_context(BrokerConfig.from_properties(p).security)
    assert KS_PW not in str(e.value) and TS_PW not in str(e.value) and "bad-pw-7x" not in str(e.value)


@pytest.mark.parametrize("key", ["ssl.keystore.type", "ssl.truststore.type"])
def test_jks_is_a_config_error_saying_how_to_convert(stores, key):
    pki, ks, ts = stores
    with pytest.raises(ConfigError, match=f"{key}=JKS is not supported.*keytool -importkeystore.*PKCS12"):
        BrokerConfig.from_properties(props(ks, ts, **{key: "JKS"}))
    with pytest.raises(ConfigError, match=f"{key} must be PEM or PKCS12"):
        BrokerConfig.from_properties(props(ks, ts, **{key: "BCFKS"}))
