"""Sans-IO parts of the broker's security (issue 22): the SASL state machine against scramp's and our
own client side, SCRAM credentials in Kafka's spelling, the file credential store, and ``logsource users``
offline errors. No sockets."""

from __future__ import annotations

import pytest
from scramp import ScramClient

from pyspark_logsource.broker import users
from pyspark_logsource.broker.security.credential_store import FileCredentialStore
from pyspark_logsource.broker.security.sasl import SaslAuthenticator, State
from pyspark_logsource.broker.security.scram_credentials import (
    ScramCredential,
    from_password,
    verify_password,
)
from pyspark_logsource.errors import ResourceNotFound, UnacceptableCredential

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture
def store(tmp_path):
    s = FileCredentialStore(tmp_path)
    s.set("alice", "SCRAM-SHA-256", from_password("SCRAM-SHA-256", "pw-256"))
    s.set("alice", "SCRAM-SHA-512", from_password("SCRAM-SHA-512", "pw-512", iterations=8192))
    return s


@pytest.mark.parametrize(("mech", "pw"), [("SCRAM-SHA-256", "pw-256"), ("SCRAM-SHA-512", "pw-512")])
def test_scram_exchange_with_scramps_client(store, mech, pw):
    auth = SaslAuthenticator(MECHS, store)
    assert auth.handshake(mech).response.error_code == 0
    client = ScramClient([mech], "alice", pw)
    first = auth.authenticate(client.get_client_first().encode())
    assert first.response.error_code == 0 and not first.close
    client.set_server_first(first.response.auth_bytes.decode())
    final = auth.authenticate(client.get_client_final().encode())
    assert final.response.error_code == 0 and str(final.principal) == "User:alice"
    client.set_server_final(final.response.auth_bytes.decode())  # the server proved it knows the key
    assert auth.authenticated and final.response.session_lifetime_ms == 0


def test_plain_checks_against_the_scram_credential(store):
    auth = SaslAuthenticator(MECHS, store)
    auth.handshake("PLAIN")
    assert str(auth.authenticate(b"\x00alice\x00pw-512").principal) == "User:alice"
    auth = SaslAuthenticator(MECHS, store)
    auth.handshake("PLAIN")
    out = auth.authenticate(b"alice\x00alice\x00nope")
    assert out.failed and out.close and out.response.error_code == 58 and out.user == "alice"
    assert "nope" not in out.reason and "nope" not in (out.response.error_message or "")


@pytest.mark.parametrize(
    "token",
    [b"\x00alice", b"bob\x00alice\x00pw-512", b"\x00\x00pw", b"\x00alice\x00", b"\xff\x00\xfe\x00\xfd"],
    ids=["two-parts", "authzid-differs", "no-user", "no-password", "not-utf8"],
)
def test_malformed_plain_fails(store, token):
    auth = SaslAuthenticator(MECHS, store)
    auth.handshake("PLAIN")
    out = auth.authenticate(token)
    assert out.failed and out.response.error_code == 58 and auth.state is State.FAILED


def test_states_out_of_order(store):
    auth = SaslAuthenticator(MECHS, store)
    out = auth.authenticate(b"x")
    assert out.response.error_code == 34 and out.close
    auth = SaslAuthenticator(MECHS, store)
    auth.handshake("PLAIN")
    assert auth.handshake("PLAIN").response.error_code == 34
    auth = SaslAuthenticator(("SCRAM-SHA-512",), store)
    out = auth.handshake("PLAIN")
    assert out.response.error_code == 33 and out.response.mechanisms == ["SCRAM-SHA-512"] and out.close


def test_the_librdkafka_nonce_is_accepted_and_nothing_looser(store):
    """librdkafka < 2.6.1 repeats its nonce in client-final; the proof over that message still counts."""
    import base64
    import hashlib
    import hmac

    def final(auth, doubled: bool, tamper: bool = False):
        auth.handshake("SCRAM-SHA-256")
        cnonce = "clientnonce"
        first = auth.authenticate(f"n,,n=alice,r={cnonce}".encode()).response.auth_bytes.decode()
        attrs = dict(a.split("=", 1) for a in first.split(","))
        r = (cnonce + attrs["r"]) if doubled else attrs["r"]
        if tamper:
            r = "x" + r
        without_proof = f"c=biws,r={r}"
        salted = hashlib.pbkdf2_hmac("sha256", b"pw-256", base64.b64decode(attrs["s"]), int(attrs["i"]))
        ck = hmac.digest(salted, b"Client Key", "sha256")
        msg = f"n=alice,r={cnonce},{first},{without_proof}".encode()
        sig = hmac.digest(hashlib.sha256(ck).digest(), msg, "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(ck, sig, strict=True))).decode()
        return auth.authenticate(f"{without_proof},p={proof}".encode())

    assert final(SaslAuthenticator(MECHS, store), doubled=False).principal is not None
    assert final(SaslAuthenticator(MECHS, store), doubled=True).principal is not None
    assert final(SaslAuthenticator(MECHS, store), doubled=True, tamper=True).response.error_code == 58


def test_credentials_spelled_as_kafka_and_never_the_password(store, tmp_path):
    cred = store.get("alice", "SCRAM-SHA-512")
    text = cred.to_kafka_string()
    assert text.startswith("salt=") and "iterations=8192" in text
    assert ScramCredential.from_kafka_string(text) == cred
    assert "pw-512" not in (tmp_path / "scram-credentials.json").read_text()
    assert "stored_key" not in repr(cred)
    assert verify_password("SCRAM-SHA-512", cred, "pw-512") and not verify_password(
        "SCRAM-SHA-512", cred, "x"
    )
    with pytest.raises(ValueError, match="malformed"):
        ScramCredential.from_kafka_string("salt=!!,iterations=x")
    for bad in ({"iterations": 100}, {"iterations": 100_000}):
        with pytest.raises(UnacceptableCredential, match="iterations"):
            from_password("SCRAM-SHA-256", "p", **bad)
    with pytest.raises(UnacceptableCredential, match="empty"):
        from_password("SCRAM-SHA-256", "")
    with pytest.raises(ResourceNotFound):
        store.delete("alice", "PLAIN")
    store.delete("alice", "SCRAM-SHA-256")
    assert store.get("alice", "SCRAM-SHA-256") is None and FileCredentialStore(tmp_path).get(
        "alice", "SCRAM-SHA-512"
    )


def test_users_cli_offline_errors(tmp_path, capsys):
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"log.dirs={tmp_path / 'logs'}\n")
    assert (
        users.main(
            [
                "set",
                "u",
                "--mechanism",
                "SCRAM-SHA-256",
                "--password-file",
                str(tmp_path / "missing"),
                "--config",
                str(cfg),
            ]
        )
        == 1
    )
    assert "cannot read --password-file" in capsys.readouterr().err
    (tmp_path / "pw").write_text("secret\n")
    assert (
        users.main(
            [
                "set",
                "u",
                "--mechanism",
                "SCRAM-SHA-256",
                "--password-file",
                str(tmp_path / "pw"),
                "--iterations",
                "10",
                "--config",
                str(cfg),
            ]
        )
        == 1
    )
    assert "iterations must be between" in capsys.readouterr().err
    assert users.main(["delete", "u", "--mechanism", "SCRAM-SHA-256", "--config", str(cfg)]) == 1
    assert "has no SCRAM-SHA-256 credential" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        users.main(["set", "u", "--mechanism", "PLAIN", "--password-file", "f", "--config", str(cfg)])


def test_command_config_that_cannot_be_read_is_a_clear_error(tmp_path, capsys):
    """``--command-config`` naming a missing file: one line naming the file, exit 1, for every command
    that reads it (broker/config.py command_config_options)."""
    from pyspark_logsource.broker.acl_cli import main as acls_main
    from pyspark_logsource.broker.config import command_config_options
    from pyspark_logsource.broker.users import main as users_main
    from pyspark_logsource.errors import LogSourceError

    missing = str(tmp_path / "nope.properties")
    assert command_config_options(None) == {}
    with pytest.raises(LogSourceError, match="cannot read --command-config .*nope.properties"):
        command_config_options(missing)
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    assert command_config_options(str(props))["security_protocol"] == "SASL_SSL"
    for main, argv in (
        (users_main, ["list", "-b", "127.0.0.1:1", "--command-config", missing]),
        (acls_main, ["list", "-b", "127.0.0.1:1", "--command-config", missing]),
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "cannot read --command-config" in err and "nope.properties" in err, err
