"""Client quota configuration in cluster mode (issue 23): quotas in ZooKeeper exactly where Kafka's ZooKeeper
mode keeps them (``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
``/config/clients/<client-id>``, sanitized names, ``<default>``), written by the broker that gets the
AlterClientQuotas and applied by every broker from the ``/config/changes`` notification within a second;
loaded by a broker that joins (after a kill -9); sharing ``/config/users/<user>`` with SCRAM credentials,
neither change losing the other's keys."""

from __future__ import annotations

import json
import time

import pytest
from support.brokers import WireClient
from support.cluster import Cluster

from pyspark_logsource.client import Admin
from pyspark_logsource.protocol import quota_messages as qm

pytestmark = pytest.mark.cluster

U, CID = qm.USER, qm.CLIENT_ID


def _quotas(bootstrap: str, *components, strict: bool = True) -> dict:
    """entity -> values as exactly this broker answers DescribeClientQuotas (from the table enforcement reads)."""
    comps = [qm.QuotaFilterComponent(*c) for c in components]
    with WireClient(bootstrap) as c:
        resp = c.request(qm.DescribeClientQuotasRequest(comps, strict))
    return {e.entity: e.values for e in resp.entries}


def _until(fn, want, timeout: float) -> float:
    """Seconds until ``fn()`` == want (fails after ``timeout``)."""
    t0 = time.monotonic()
    while True:
        got = fn()
        if got == want:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, f"after {timeout}s: {got} != {want}"
        time.sleep(0.02)


def _config(c: Cluster, path: str) -> dict:
    return json.loads(c.zk.get(path)[0] or b"{}").get("config", {})


def test_quotas_live_in_kafkas_znodes_and_reach_every_broker_within_a_second(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=2) as c:
        b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap
        lags = []
        for entity, ops, path, stored in [
            (
                ((U, "alice"),),
                {"producer_byte_rate": 1048576},
                "/config/users/alice",
                {"producer_byte_rate": "1048576"},
            ),
            (
                ((U, "alice"), (CID, "etl job")),
                {"request_percentage": 12.5},
                "/config/users/alice/clients/etl%20job",
                {"request_percentage": "12.5"},
            ),
            (
                ((U, None),),
                {"consumer_byte_rate": 2048},
                "/config/users/<default>",
                {"consumer_byte_rate": "2048"},
            ),
            (
                ((U, "CN=bob,O=x"), (CID, None)),
                {"consumer_byte_rate": 4096},
                "/config/users/CN%3Dbob%2CO%3Dx/clients/<default>",
                {"consumer_byte_rate": "4096"},
            ),
            (
                ((CID, None),),
                {"producer_byte_rate": 512},
                "/config/clients/<default>",
                {"producer_byte_rate": "512"},
            ),
            (
                ((CID, "c*1"),),
                {"producer_byte_rate": 64},
                "/config/clients/c%2A1",
                {"producer_byte_rate": "64"},
            ),
        ]:
            with Admin(b1) as a:
                a.alter_client_quotas({entity: ops})
            t_written = time.monotonic()
            assert _config(c, path) == stored, path
            want = {entity: {k: float(v) for k, v in ops.items()}}
            comps = [(t, qm.MATCH_DEFAULT if n is None else qm.MATCH_EXACT, n) for t, n in entity]
            _until(lambda comps=comps: _quotas(b2, *comps), want, 1.0)
            lags.append(time.monotonic() - t_written)
        # the notification, in Kafka's format, names the (user, client-id) entity path
        notes = [
            json.loads(c.zk.get(f"/config/changes/{n}")[0]) for n in c.zk.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": "users/alice/clients/etl%20job"} in notes
        assert {"version": 2, "entity_path": "clients/<default>"} in notes
        # a removal through broker 2 reaches broker 1; the znode keeps its place with an empty config (as Kafka)
        with Admin(b2) as a:
            a.alter_client_quotas({((U, "alice"),): {"producer_byte_rate": None}})
        _until(lambda: _quotas(b1, (U, qm.MATCH_EXACT, "alice")), {}, 1.0)
        assert _config(c, "/config/users/alice") == {}
        # every broker answers the same table
        assert _quotas(b1, strict=False) == _quotas(b2, strict=False)
        assert len(_quotas(b1, strict=False)) == 5
        print(f"propagation to broker 2 after the write returned: max {max(lags) * 1000:.0f} ms")


def test_a_broker_that_joins_loads_every_quota_and_a_kill_9_loses_none(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=2) as c:
        b1 = c.brokers[1].bootstrap
        with Admin(b1) as a:
            a.alter_client_quotas({((U, "early"),): {"producer_byte_rate": 100}})
        c.kill(2)
        # written while broker 2 is down: no notification reaches it; it reads ZooKeeper when it joins
        with Admin(b1) as a:
            a.alter_client_quotas(
                {
                    ((U, "late"), (CID, "c")): {"consumer_byte_rate": 200},
                    ((U, "early"),): {"request_percentage": 5},
                }
            )
        c.start(2)
        b2 = c.brokers[2].bootstrap
        want = {
            ((U, "early"),): {"producer_byte_rate": 100.0, "request_percentage": 5.0},
            ((U, "late"), (CID, "c")): {"consumer_byte_rate": 200.0},
        }
        assert _quotas(b2, strict=False) == want
        c.kill(1)
        c.start(1)
        assert _quotas(c.brokers[1].bootstrap, strict=False) == want


def test_scram_credentials_and_quotas_share_the_user_znode(zk_connect, tmp_path):
    with Cluster(zk_connect, tmp_path, brokers=2) as c:
        b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap
        with Admin(b1) as a:
            a.set_scram_credential("carol", "SCRAM-SHA-512", "carol-pw")
            a.alter_client_quotas({((U, "carol"),): {"producer_byte_rate": 1000}})
        cfg = _config(c, "/config/users/carol")
        assert cfg["producer_byte_rate"] == "1000" and "iterations=4096" in cfg["SCRAM-SHA-512"]
        # a credential change keeps the quota, on the znode and on every broker
        with Admin(b2) as a:
            a.set_scram_credential("carol", "SCRAM-SHA-256", "carol-pw-2")
        cfg = _config(c, "/config/users/carol")
        assert cfg["producer_byte_rate"] == "1000" and {"SCRAM-SHA-256", "SCRAM-SHA-512"} <= set(cfg)
        with Admin(b1) as a:
            a.delete_scram_credential("carol", "SCRAM-SHA-512")
            a.delete_scram_credential("carol", "SCRAM-SHA-256")
        assert _config(c, "/config/users/carol") == {"producer_byte_rate": "1000"}
        for bs in (b1, b2):
            assert _quotas(bs, (U, qm.MATCH_EXACT, "carol")) == {
                ((U, "carol"),): {"producer_byte_rate": 1000.0}
            }
        # a quota change keeps the credential; a user with only quotas is not listed as a SCRAM user
        with Admin(b2) as a:
            a.set_scram_credential("carol", "SCRAM-SHA-512", "carol-pw-3")
            a.alter_client_quotas({((U, "carol"),): {"producer_byte_rate": None, "consumer_byte_rate": 77}})
            a.alter_client_quotas({((U, "quota-only"),): {"consumer_byte_rate": 1}})
        cfg = _config(c, "/config/users/carol")
        assert (
            cfg["consumer_byte_rate"] == "77" and "producer_byte_rate" not in cfg and "SCRAM-SHA-512" in cfg
        )
        for bs in (b1, b2):
            with Admin(bs) as a:
                _until(lambda a=a: a.scram_credentials().get("carol"), [("SCRAM-SHA-512", 4096)], 1.0)
                assert "quota-only" not in a.scram_credentials()
        # a name Kafka's Sanitizer encodes: both live in the one sanitized znode, and read back by name
        with Admin(b1) as a:
            a.set_scram_credential("svc@corp x", "SCRAM-SHA-256", "svc-pw")
            a.alter_client_quotas({((U, "svc@corp x"),): {"producer_byte_rate": 5}})
        cfg = _config(c, "/config/users/svc%40corp%20x")
        assert cfg["producer_byte_rate"] == "5" and "SCRAM-SHA-256" in cfg
        assert "svc@corp x" not in c.zk.get_children("/config/users")
        for bs in (b1, b2):
            with Admin(bs) as a:
                _until(lambda a=a: a.scram_credentials().get("svc@corp x"), [("SCRAM-SHA-256", 4096)], 1.0)
            want = {((U, "svc@corp x"),): {"producer_byte_rate": 5.0}}
            _until(lambda bs=bs: _quotas(bs, (U, qm.MATCH_EXACT, "svc@corp x")), want, 1.0)


def test_the_table_enforcement_reads_follows_and_concurrent_writers_lose_nothing(zk_connect, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from pyspark_logsource.broker.quotas.model import DEFAULT, QuotaEntity

    with Cluster(zk_connect, tmp_path, brokers=2, thread_brokers={2}) as c:
        b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap
        table = c.brokers[2]._broker.state.quotas  # broker 2's one QuotaTable, as enforcement reads it
        changed = []
        table.add_listener(lambda: changed.append(1))
        with Admin(b1) as a:
            a.alter_client_quotas(
                {
                    ((U, "alice"),): {"producer_byte_rate": 1000},
                    ((U, None),): {"consumer_byte_rate": 500},
                    ((CID, None),): {"request_percentage": 10},
                }
            )
        _until(lambda: table.quotas_for("alice", "any").request_percentage, 10.0, 1.0)
        q = table.quotas_for("alice", "any")
        assert (q.producer_byte_rate, q.consumer_byte_rate, q.request_percentage) == (1000.0, 500.0, 10.0)
        assert (q.producer_entity, q.consumer_entity, q.request_entity) == (
            QuotaEntity("alice", None),
            QuotaEntity(DEFAULT, None),
            QuotaEntity(None, DEFAULT),
        )
        assert len(changed) >= 3

        # two brokers write different keys of one entity at the same time: version-conditioned writes keep both
        def writer(bs: str, key: str) -> None:
            with WireClient(bs) as w:  # exactly this broker writes
                for i in range(1, 31):
                    op = qm.QuotaAlteration(((U, "race"),), [qm.QuotaOp(key, i * 100.0)])
                    resp = w.request(qm.AlterClientQuotasRequest([op]))
                    assert resp.entries[0].error_code == 0, resp

        with ThreadPoolExecutor(2) as ex:
            list(ex.map(writer, (b1, b2), ("producer_byte_rate", "consumer_byte_rate")))
        assert _config(c, "/config/users/race") == {
            "producer_byte_rate": "3000",
            "consumer_byte_rate": "3000",
        }
        want = {((U, "race"),): {"producer_byte_rate": 3000.0, "consumer_byte_rate": 3000.0}}
        for bs in (b1, b2):
            _until(lambda bs=bs: _quotas(bs, (U, qm.MATCH_EXACT, "race")), want, 1.0)
