"""Client quota configuration on a single broker (issue 23): DescribeClientQuotas / AlterClientQuotas through
our Admin, Kafka's kafka-configs and our ``logsource quotas`` CLI against a broker process; the quotas kept in
the data dir across a clean restart and a kill -9; every bad input answered with Kafka's error code."""

from __future__ import annotations

import json
import math

import pytest
from support.brokers import WireClient, broker_process

from pyspark_logsource.broker.quotas import cli as quota_cli
from pyspark_logsource.broker.quotas.store import STORE_FILE
from pyspark_logsource.client import Admin
from pyspark_logsource.errors import InvalidRequest, UnsupportedVersion
from pyspark_logsource.protocol import quota_messages as qm

U, CID = qm.USER, qm.CLIENT_ID


def _all(bootstrap: str, *components, strict: bool = False) -> dict:
    """entity -> values, as DescribeClientQuotas on exactly this broker answers."""
    comps = [qm.QuotaFilterComponent(*c) for c in components]
    with WireClient(bootstrap) as c:
        resp = c.request(qm.DescribeClientQuotasRequest(comps, strict))
    return {e.entity: e.values for e in resp.entries}


def test_alter_and_describe_round_trip_with_filters_and_validate_only(broker):
    bs = broker.bootstrap
    with Admin(bs) as a:
        a.alter_client_quotas(
            {
                ((U, "qa-alice"),): {"producer_byte_rate": 1048576, "request_percentage": 50.5},
                ((U, "qa-alice"), (CID, "etl")): {"consumer_byte_rate": 4096},
                ((U, "qa-alice"), (CID, None)): {"consumer_byte_rate": 2048},
                ((CID, None),): {"producer_byte_rate": 512},
            }
        )
        got = _all(bs, (U, qm.MATCH_EXACT, "qa-alice"))
        assert got == {
            ((U, "qa-alice"),): {"producer_byte_rate": 1048576.0, "request_percentage": 50.5},
            ((U, "qa-alice"), (CID, "etl")): {"consumer_byte_rate": 4096.0},
            ((U, "qa-alice"), (CID, None)): {"consumer_byte_rate": 2048.0},
        }
        assert _all(bs, (U, qm.MATCH_EXACT, "qa-alice"), strict=True) == {
            ((U, "qa-alice"),): {"producer_byte_rate": 1048576.0, "request_percentage": 50.5}
        }
        assert _all(bs, (CID, qm.MATCH_DEFAULT, None), strict=True) == {
            ((CID, None),): {"producer_byte_rate": 512.0}
        }
        entries = a.describe_client_quotas([qm.QuotaFilterComponent(CID, qm.MATCH_ANY)], strict=False)
        assert {e.entity for e in entries} >= {((U, "qa-alice"), (CID, "etl")), ((CID, None),)}
        # validate_only changes nothing; an empty filter lists everything
        a.alter_client_quotas({((U, "qa-bob"),): {"producer_byte_rate": 1}}, validate_only=True)
        assert ((U, "qa-bob"),) not in _all(bs)
        # remove one key, then the last: the entity is gone
        a.alter_client_quotas({((U, "qa-alice"),): {"request_percentage": None}})
        assert _all(bs, (U, qm.MATCH_EXACT, "qa-alice"), strict=True) == {
            ((U, "qa-alice"),): {"producer_byte_rate": 1048576.0}
        }
        a.alter_client_quotas({((U, "qa-alice"),): {"producer_byte_rate": None, "consumer_byte_rate": None}})
        assert _all(bs, (U, qm.MATCH_EXACT, "qa-alice"), strict=True) == {}
        # removing what is not set is fine (Kafka ignores it)
        a.alter_client_quotas({((U, "qa-nobody"),): {"producer_byte_rate": None}})


def _alter_error(bootstrap: str, entity, ops) -> tuple[int, str]:
    with WireClient(bootstrap) as c:
        resp = c.request(qm.AlterClientQuotasRequest([qm.QuotaAlteration(entity, ops)]))
    (r,) = resp.entries
    assert r.entity == entity
    return r.error_code, r.error_message or ""


def test_bad_alterations_get_invalid_request_naming_the_problem(broker):
    bs = broker.bootstrap
    user = ((U, "qa-bad"),)
    cases = [
        (user, [qm.QuotaOp("producer_byte_rate", -1024.0)], "producer_byte_rate must be a positive number"),
        (user, [qm.QuotaOp("request_percentage", 0.0)], "request_percentage must be a positive number"),
        (user, [qm.QuotaOp("consumer_byte_rate", math.nan)], "consumer_byte_rate must be a positive number"),
        (user, [qm.QuotaOp("producer_byte_rate", 1.5)], "producer_byte_rate must be a LONG value"),
        (user, [qm.QuotaOp("bogus_rate", 5.0)], "Invalid configuration key bogus_rate"),
        (user, [qm.QuotaOp("producer_byte_rate", 1.0)] * 2, "Duplicate quota key producer_byte_rate"),
        (
            (("group", "g"),),
            [qm.QuotaOp("producer_byte_rate", 1.0)],
            "Unhandled client quota entity type: group",
        ),
        ((), [qm.QuotaOp("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        (((U, ""),), [qm.QuotaOp("producer_byte_rate", 1.0)], "Empty user not supported"),
        ((("ip", "127.0.0.1"),), [qm.QuotaOp("connection_creation_rate", 1.0)], "ip quotas"),
    ]
    for entity, ops, text in cases:
        code, message = _alter_error(bs, entity, ops)
        assert (code, text in message) == (InvalidRequest.code, True), (entity, ops, code, message)
    assert ((U, "qa-bad"),) not in _all(bs)
    # one bad entry does not stop the good one beside it
    with WireClient(bs) as c:
        resp = c.request(
            qm.AlterClientQuotasRequest(
                [
                    qm.QuotaAlteration(((U, "qa-good"),), [qm.QuotaOp("producer_byte_rate", 100.0)]),
                    qm.QuotaAlteration(((U, "qa-bad"),), [qm.QuotaOp("producer_byte_rate", -1.0)]),
                ]
            )
        )
    assert [r.error_code for r in resp.entries] == [0, InvalidRequest.code]
    assert _all(bs, (U, qm.MATCH_EXACT, "qa-good"), strict=True) == {
        ((U, "qa-good"),): {"producer_byte_rate": 100.0}
    }
    # through our Admin: the typed error naming the key
    with Admin(bs) as a, pytest.raises(InvalidRequest, match="producer_byte_rate must be a positive number"):
        a.alter_client_quotas({((U, "qa-bad"),): {"producer_byte_rate": -5}})


def test_bad_describe_filters_get_kafkas_codes(broker):
    with WireClient(broker.bootstrap) as c:
        for comps, code, text in [
            ([("group", qm.MATCH_ANY, None)], UnsupportedVersion.code, "Unsupported entity type group"),
            ([(U, qm.MATCH_EXACT, None)], InvalidRequest.code, "MATCH_TYPE_EXACT"),
            ([(U, qm.MATCH_ANY, None), (U, qm.MATCH_DEFAULT, None)], InvalidRequest.code, "more than once"),
            ([(U, 9, None)], InvalidRequest.code, "Unknown match type 9"),
        ]:
            req = qm.DescribeClientQuotasRequest([qm.QuotaFilterComponent(*x) for x in comps])
            resp = c.request(req, check=False)
            assert (resp.error_code, text in (resp.error_message or ""), resp.entries) == (code, True, None)


def test_quotas_survive_a_restart_and_a_kill_9(tmp_path):
    with broker_process(tmp_path / "b") as b:
        with Admin(b.bootstrap) as a:
            a.alter_client_quotas(
                {
                    ((U, "alice"),): {"producer_byte_rate": 1000},
                    ((U, None), (CID, None)): {"request_percentage": 25},
                }
            )
        want = {
            ((U, "alice"),): {"producer_byte_rate": 1000.0},
            ((U, None), (CID, None)): {"request_percentage": 25.0},
        }
        assert _all(b.bootstrap) == want
        doc = json.loads((tmp_path / "b" / "logs" / STORE_FILE).read_text())
        assert {"user": "alice", "quotas": {"producer_byte_rate": 1000.0}} in doc
        b.restart()
        assert _all(b.bootstrap) == want
        with Admin(b.bootstrap) as a:
            a.alter_client_quotas({((CID, "etl"),): {"consumer_byte_rate": 4096}})
        b.kill()  # the write was fsynced and renamed before the answer
        b.start()
        assert _all(b.bootstrap) == {**want, ((CID, "etl"),): {"consumer_byte_rate": 4096.0}}


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = quota_cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_set_list_remove(broker, capsys):
    bs = ("--bootstrap-server", broker.bootstrap)
    code, out, _ = _cli(capsys, "set", "--user", "cli-u", "--producer-byte-rate", "1048576", *bs)
    assert code == 0 and "set producer_byte_rate=1048576 for user cli-u" in out, out
    assert (
        _cli(capsys, "set", "--user", "cli-u", "--client-id", "c1", "--request-percentage", "12.5", *bs)[0]
        == 0
    )
    assert (
        _cli(capsys, "set", "--user", "cli-u", "--client-default", "--consumer-byte-rate", "2048", *bs)[0]
        == 0
    )
    assert _cli(capsys, "set", "--client-id", "--default", "--consumer-byte-rate", "999", *bs)[0] == 0
    assert _all(broker.bootstrap, (U, qm.MATCH_EXACT, "cli-u")) == {
        ((U, "cli-u"),): {"producer_byte_rate": 1048576.0},
        ((U, "cli-u"), (CID, "c1")): {"request_percentage": 12.5},
        ((U, "cli-u"), (CID, None)): {"consumer_byte_rate": 2048.0},
    }
    code, out, _ = _cli(capsys, "list", "--user", "cli-u", *bs)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "USER",
        "CLIENT-ID",
        "PRODUCER_BYTE_RATE",
        "CONSUMER_BYTE_RATE",
        "REQUEST_PERCENTAGE",
    ]
    assert sorted(ln.split() for ln in lines[1:]) == [
        ["cli-u", "-", "1048576", "-", "-"],
        ["cli-u", "<default>", "-", "2048", "-"],
        ["cli-u", "c1", "-", "-", "12.5"],
    ]
    code, out, _ = _cli(capsys, "list", "--client-id", "--default", "--strict", *bs)
    (row,) = [ln.split() for ln in out.splitlines()[1:]]  # the module's broker: other tests set it too
    assert code == 0 and row[:2] == ["-", "<default>"] and row[3] == "999"
    code, out, _ = _cli(capsys, "remove", "--user", "cli-u", "--client-id", "c1", *bs)
    assert code == 0 and "removed" in out
    code, out, _ = _cli(capsys, "remove", "--user", "cli-u", "--producer-byte-rate", *bs)
    assert code == 0
    assert _all(broker.bootstrap, (U, qm.MATCH_EXACT, "cli-u")) == {
        ((U, "cli-u"), (CID, None)): {"consumer_byte_rate": 2048.0}
    }


def test_cli_bad_input_is_one_line_and_exit_2_or_1(broker, capsys):
    bs = ("--bootstrap-server", broker.bootstrap)
    for argv, status, text in [
        (
            ("set", "--user", "u", "--producer-byte-rate", "fast"),
            2,
            "--producer-byte-rate must be a number, got 'fast'",
        ),
        (("set", "--user", "u"), 2, "give at least one of"),
        (("set", "--producer-byte-rate", "5"), 2, "name the entity"),
        (("set", "--user", "--producer-byte-rate", "5"), 2, "--user needs a NAME, or --default"),
        (("set", "--user", "u", "--default", "--producer-byte-rate", "5"), 2, "--default applies to"),
        (("set", "--user", "u", "--user-default", "--producer-byte-rate", "5"), 2, "name two entities"),
        (
            ("set", "--user", "u", "--producer-byte-rate", "-5"),
            1,
            "producer_byte_rate must be a positive number",
        ),
        (
            ("set", "--user", "u", "--request-percentage", "0"),
            1,
            "request_percentage must be a positive number",
        ),
        (("set", "--user", "u", "--producer-byte-rate", "1.5"), 1, "producer_byte_rate must be a LONG value"),
    ]:
        code, out, err = _cli(capsys, *argv, *bs)
        assert (code, err.count("\n"), text in err) == (status, 1, True), (argv, code, err)
    code, _, err = _cli(capsys, "list", "--command-config", "/nonexistent/client.properties", *bs)
    assert code == 1 and "/nonexistent/client.properties" in err and err.count("\n") == 1


@pytest.mark.real_kafka
def test_kafka_configs_sets_describes_and_deletes_quotas(broker):
    from support.kafka_peer import kafka_classpath, kafka_tool

    try:
        kafka_classpath()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    bs = broker.bootstrap
    cmd = ("kafka.admin.ConfigCommand", "--bootstrap-server", bs)
    user = ("--entity-type", "users", "--entity-name", "kc-user")
    out = kafka_tool(
        *cmd, *user, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"
    ).stdout
    assert "Completed updating config for user kc-user." in out, out
    both = (*user, "--entity-type", "clients", "--entity-default")
    kafka_tool(*cmd, *both, "--alter", "--add-config", "request_percentage=40")
    assert _all(bs, (U, qm.MATCH_EXACT, "kc-user")) == {
        ((U, "kc-user"),): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        ((U, "kc-user"), (CID, None)): {"request_percentage": 40.0},
    }
    desc = kafka_tool(*cmd, *user, "--describe").stdout
    assert "producer_byte_rate=1048576" in desc and "consumer_byte_rate=2097152" in desc, desc
    every = kafka_tool(*cmd, "--entity-type", "users", "--describe").stdout
    assert "kc-user" in every and "producer_byte_rate=1048576" in every, every
    pair = kafka_tool(*cmd, *both, "--describe").stdout
    assert "request_percentage=40" in pair, pair
    kafka_tool(*cmd, *user, "--alter", "--delete-config", "consumer_byte_rate")
    assert _all(bs, (U, qm.MATCH_EXACT, "kc-user"), strict=True) == {
        ((U, "kc-user"),): {"producer_byte_rate": 1048576.0}
    }
    bad = kafka_tool(*cmd, *user, "--alter", "--add-config", "producer_byte_rate=-5", check=False)
    text = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "InvalidRequestException" in text and "producer_byte_rate" in text, text
