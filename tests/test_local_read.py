"""Local short-circuit reads (broker/local_read.py, client/local_read.py): the grant's codec, the
one-time tokens and the Unix socket, rows identical to the network read on both stored layouts and with
read_committed, the ACL refusal, and the fall back to the network when a file changed after the grant."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from support.brokers import RECENT_TS, broker_process
from support.secure import USERS, add_users_offline, broker_properties, make_pki, write_properties

from pyspark_logsource.broker.local_read import (
    SOCKET_NAME,
    Grants,
    LocalReadServer,
    peer_allowed,
    peer_uid,
)
from pyspark_logsource.client import Admin, Producer, read_range
from pyspark_logsource.client import local_read as lr
from pyspark_logsource.client.network import NetworkClient
from pyspark_logsource.client.security import ClientSecurity
from pyspark_logsource.client.txn import StagedTxns, TransactionalProducer
from pyspark_logsource.errors import InvalidRequest, TopicAuthorizationFailed
from pyspark_logsource.format import HEADER_SIZE
from pyspark_logsource.protocol import codecs
from pyspark_logsource.protocol import local_read_messages as lrm
from pyspark_logsource.protocol.api_keys import RequestHeader
from pyspark_logsource.protocol.primitives import Reader
from pyspark_logsource.protocol.txn_messages import StagedProducer

COLUMNS = ["key", "value", "offset", "timestamp", "timestamp_type", "headers"]


def _short_dir() -> Path:
    """A directory whose socket path fits sun_path (pytest's tmp paths may not)."""
    return Path(tempfile.mkdtemp(prefix="lr-", dir="/tmp"))


# ------------------------------------------------------------------ the codec


def _round_trip(req: lrm.LocalReadGrantRequest) -> lrm.LocalReadGrantRequest:
    parts = codecs.encode_request(RequestHeader(req.API_KEY, 0, 7, "c"), req)
    r = Reader(memoryview(b"".join(bytes(p) for p in parts)[4:]))
    return codecs.decode_request_body(codecs.decode_request_header(r), r)


def _round_trip_response(resp: lrm.LocalReadGrantResponse) -> lrm.LocalReadGrantResponse:
    frame = b"".join(
        bytes(p) for p in codecs.encode_response(RequestHeader(lrm.LOCAL_READ_GRANT_KEY, 0, 7, "c"), resp)
    )
    r = Reader(frame[4:])
    r.i32()
    return codecs.decode_response_body(lrm.LOCAL_READ_GRANT_KEY, 0, r)


def test_grant_codec_round_trips_and_is_advertised():
    req = lrm.LocalReadGrantRequest("t", 3, 12345, 1, 7)
    assert _round_trip(req) == req
    resp = lrm.LocalReadGrantResponse(
        0,
        None,
        100,
        90,
        5,
        90,
        7,
        [(11, 40), (12, 60)],
        [lrm.LocalReadRegion(5, 0, 4096), lrm.LocalReadRegion(50, 0, 123)],
        True,
        "boot-id",
        "/d/local-read.sock",
        b"\x01" * 16,
        0,
    )
    assert _round_trip_response(resp) == resp
    refused = lrm.LocalReadGrantResponse(TopicAuthorizationFailed.code, "no")
    assert _round_trip_response(refused) == refused
    assert codecs.SUPPORTED_VERSIONS[lrm.LOCAL_READ_GRANT_KEY] == (0, 0)


# ------------------------------------------------------------------ tokens and the socket


def test_grant_tokens_work_once_and_expire():
    now = [0.0]
    g = Grants(ttl_s=10, clock=lambda: now[0])
    r, w = os.pipe()
    try:
        token = g.add([os.dup(r)])
        assert len(token) == lrm.TOKEN_BYTES
        assert g.redeem(b"\x00" * lrm.TOKEN_BYTES) is None  # forged
        fds = g.redeem(token)
        assert fds is not None and len(fds) == 1
        os.close(fds[0])
        assert g.redeem(token) is None  # reused
        late = g.add([os.dup(r)])
        now[0] = 10.0
        assert g.redeem(late) is None  # expired: its descriptor was closed
        assert len(g) == 0
        assert g.counts == {"granted": 2, "redeemed": 1, "refused": 3, "expired": 1}
    finally:
        os.close(r)
        os.close(w)


def test_grants_beyond_the_limit_close_the_oldest():
    g = Grants(limit=2)
    r, w = os.pipe()
    try:
        first = g.add([os.dup(r)])
        g.add([os.dup(r)])
        g.add([os.dup(r)])
        assert len(g) == 2 and g.redeem(first) is None
    finally:
        g.close()
        os.close(r)
        os.close(w)


def test_peer_check_admits_the_brokers_user_only():
    assert peer_allowed(1000, 1000)
    assert not peer_allowed(1001, 1000)
    assert not peer_allowed(0, 1000)


def test_socket_hands_descriptors_once_to_a_token_holder():
    d = _short_dir()
    try:
        data = d / "segment"
        data.write_bytes(b"segment bytes")
        g = Grants()
        server = LocalReadServer(d / SOCKET_NAME, g)
        server.start()
        try:
            assert stat.S_IMODE(os.stat(d / SOCKET_NAME).st_mode) == 0o600
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(d / SOCKET_NAME))
                assert peer_uid(s) == os.geteuid()  # SO_PEERCRED as the server reads it
            fd = os.open(data, os.O_RDONLY)
            token = g.add([fd])
            assert lr.redeem(str(d / SOCKET_NAME), b"\x02" * lrm.TOKEN_BYTES, 1) is None  # forged
            got = lr.redeem(str(d / SOCKET_NAME), token, 1)
            assert got is not None and len(got) == 1
            assert os.pread(got[0], 100, 0) == b"segment bytes"
            os.close(got[0])
            assert lr.redeem(str(d / SOCKET_NAME), token, 1) is None  # used
        finally:
            server.close()
        assert not (d / SOCKET_NAME).exists()
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ against a broker


@pytest.fixture(scope="module")
def local_broker():
    d = _short_dir()
    try:
        with broker_process(d) as b:
            yield b
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _table(bs: str, topic: str, start: int, end: int, mode: str, **kw) -> pa.Table:
    batches = list(read_range(bs, topic, 0, start, end, whole_fetches=True, local_read=mode, **kw))
    return pa.Table.from_batches(batches).select(COLUMNS)


def _fill(bs: str, topic: str, n: int) -> None:
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1, config={"segment.bytes": "20000"})
    with Producer(bs, batch_size=2000, linger_ms=0) as p:
        for i in range(n):
            p.send(
                topic,
                None if i % 11 == 3 else b"value-%d" % i,  # tombstones
                key=None if i % 5 == 0 else b"k%d" % (i % 7),
                headers=[("h", b"%d" % i)] if i % 13 == 0 else None,
                timestamp_ms=RECENT_TS + i,
                partition=0,
            )
        p.flush()


def test_local_rows_equal_the_network_rows(local_broker, topic_name):
    bs, topic = local_broker.bootstrap, topic_name("lr")
    _fill(bs, topic, 3000)
    for start, end, max_bytes in [(0, 3000, 1 << 20), (17, 2999, 5000), (1500, 1501, 1024)]:
        before = dict(lr.STATS)
        local = _table(bs, topic, start, end, "true", max_bytes=max_bytes)
        assert lr.STATS["granted"] == before["granted"] + 1  # the files were read ...
        assert lr.STATS["fallbacks"] == before["fallbacks"]  # ... to the end, with no fall back
        assert lr.STATS["batches"] > before["batches"]
        network = _table(bs, topic, start, end, "false", max_bytes=max_bytes)
        assert local.equals(network), (start, end)
        assert local.column("offset").to_pylist() == list(range(start, end))
    values = _table(bs, topic, 0, 3000, "auto").column("value").to_pylist()
    assert values[3] is None and values[4] == b"value-4"


def test_local_rows_equal_the_network_rows_across_many_reused_chunks(local_broker, topic_name):
    """Arrow-bodied batches (the compiled column build): every chunk is read into the same buffer, and
    the batches taken earlier still hold their rows once later chunks overwrote it."""
    bs, topic = local_broker.bootstrap, topic_name("lrc")
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1)
    n = 20_000
    with Producer(bs, batch_size=4000, linger_ms=5) as p:
        for s in range(0, n, 500):
            vals = [b"v%07d-" % i + bytes([97 + i % 26]) * (i % 40) for i in range(s, s + 500)]
            p.send_arrow(
                topic, pa.table({"value": vals, "key": [b"k%d" % (i % 9) for i in range(s, s + 500)]})
            )
        p.flush()
    for max_bytes in (4096, 20_000):
        before = dict(lr.STATS)
        local = list(
            read_range(bs, topic, 0, 0, n, whole_fetches=True, local_read="true", max_bytes=max_bytes)
        )
        assert lr.STATS["fallbacks"] == before["fallbacks"] and lr.STATS["granted"] == before["granted"] + 1
        assert len(local) > 10  # many chunks through one buffer
        network = _table(bs, topic, 0, n, "false", max_bytes=max_bytes)
        assert pa.Table.from_batches(local).select(COLUMNS).equals(network)
        assert network.column("value")[n - 1].as_py() == b"v%07d-" % (n - 1) + bytes([97 + (n - 1) % 26]) * (
            (n - 1) % 40
        )


def _fill_arrow(bs: str, topic: str, n: int, rows_per_batch: int, keys: bool = True, **config) -> None:
    """``n`` rows sent as Arrow tables of ``rows_per_batch`` rows, a batch each (each flushed before the
    next is sent: the producer never groups two, however busy the machine)."""
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1, config={k.replace("_", "."): str(v) for k, v in config.items()})
    with Producer(bs, batch_size=4 << 20, linger_ms=5) as p:
        for s in range(0, n, rows_per_batch):
            rows = range(s, min(n, s + rows_per_batch))
            cols = {"value": [b"v%07d-" % i + bytes([97 + i % 26]) * (i % 90) for i in rows]}
            if keys:
                cols["key"] = [b"k%d" % (i % 9) for i in rows]
            p.send_arrow(topic, pa.table(cols), partition=0)
            p.flush()


@pytest.mark.parametrize("keys", [True, False])
@pytest.mark.parametrize("min_batch", [None, 0])
def test_large_arrow_batches_are_read_in_pieces_to_the_network_rows(
    local_broker, topic_name, monkeypatch, keys, min_batch
):
    """Batches from ``PIECES_MIN_BATCH`` on (~180 KB here, or every one) come in pieces, their keys and
    values read straight into the columns; the rows are the network read's, over chunk sizes from one
    batch to many and ranges that start and end inside batches."""
    bs, topic = local_broker.bootstrap, topic_name("lrp")
    if min_batch is not None:
        monkeypatch.setattr(lr, "PIECES_MIN_BATCH", min_batch)
    n = 12_000
    _fill_arrow(bs, topic, n, rows_per_batch=2500, keys=keys, segment_bytes=400_000)
    for start, end, max_bytes in [(0, n, 4096), (0, n, 250_000), (1234, 11_111, 1 << 20), (5, 6, 1 << 20)]:
        before = dict(lr.STATS)
        local = _table(bs, topic, start, end, "true", max_bytes=max_bytes)
        assert lr.STATS["fallbacks"] == before["fallbacks"] and lr.STATS["granted"] == before["granted"] + 1
        assert lr.STATS["pieces"] > before["pieces"]
        network = _table(bs, topic, start, end, "false", max_bytes=max_bytes)
        assert local.equals(network), (start, end, max_bytes)
        assert local.column("offset").to_pylist() == list(range(start, end))
    if min_batch is None:  # small batches are read whole (one read each chunk, not three each batch)
        small = topic_name("lrs")
        _fill_arrow(bs, small, 2000, rows_per_batch=100, keys=keys)
        before = dict(lr.STATS)
        assert _table(bs, small, 0, 2000, "true").equals(_table(bs, small, 0, 2000, "false"))
        assert lr.STATS["batches"] >= before["batches"] + 20 and lr.STATS["pieces"] == before["pieces"]


def test_the_read_buffer_is_given_up_while_a_batch_points_into_it():
    scratch = lr._Scratch()
    buf = scratch.get(64)
    assert len(buf) == 64 and scratch.get(16) is buf  # a smaller read reuses it
    buf[:8] = b"abcdefgh"
    copied = pa.record_batch([pa.array([b"abc"])], names=["v"])
    scratch.release_if_referenced(copied)
    assert scratch.get(64) is buf  # rows copied out: the buffer is read into again
    view = pa.Array.from_buffers(
        pa.binary(),
        1,
        [None, pa.py_buffer(pa.array([0, 3], pa.int32()).buffers()[1]), pa.py_buffer(memoryview(buf)[2:5])],
    )
    scratch.release_if_referenced(pa.record_batch([view], names=["v"]))
    fresh = scratch.get(64)
    assert fresh is not buf and len(fresh) == 64
    assert len(scratch.get(128)) == 128  # a larger read grows it
    assert view.to_pylist() == [b"cde"]


@pytest.mark.parametrize("pieces", [False, True])
def test_local_read_committed_drops_the_aborted_transaction(local_broker, topic_name, monkeypatch, pieces):
    """With every batch eligible for pieces too: transactional batches are then read whole under
    read_committed (the filter drops the aborted ones) and in pieces under read_uncommitted."""
    if pieces:
        monkeypatch.setattr(lr, "PIECES_MIN_BATCH", 0)
    bs, topic = local_broker.bootstrap, topic_name("lrtxn")
    with Admin(bs) as a, StagedTxns(bs) as txns:
        a.create_topic(topic, partitions=1)
        with Producer(bs) as p:
            for i in range(3):
                p.send(topic, b"plain-%d" % i, partition=0)
        staged = []
        for name in ("win", "lose"):
            tp = TransactionalProducer(bs, acks=-1)
            try:
                pid, epoch = tp.producer_id_and_epoch()
                txns.register("w-" + topic, pid, epoch, [(topic, 0)], 60000)
                futures = [tp.send(topic, b"%s-%d" % (name.encode(), i), partition=0) for i in range(4)]
                tp.flush()
                for f in futures:
                    f.result()
                staged.append(StagedProducer(pid, epoch, {(topic, 0): 4}))
            finally:
                tp.close()
        assert txns.commit("w-" + topic, 0, [staged[0]]).committed  # "lose" is aborted
        with Producer(bs) as p:
            p.send(topic, b"after", partition=0).result()
        end = a.list_offsets([(topic, 0)], "latest", read_committed=True)[(topic, 0)]
    before = lr.STATS["granted"]
    local = _table(bs, topic, 0, end, "true")
    assert lr.STATS["granted"] == before + 1
    assert local.equals(_table(bs, topic, 0, end, "false"))
    assert local.column("value").to_pylist() == [
        *[b"plain-%d" % i for i in range(3)],
        *[b"win-%d" % i for i in range(4)],
        b"after",
    ]
    # read_uncommitted sees the aborted rows, locally as over the network
    in_pieces = lr.STATS["pieces"]
    unc = _table(bs, topic, 0, end, "true", read_committed=False)
    assert unc.equals(_table(bs, topic, 0, end, "false", read_committed=False))
    assert unc.num_rows == 12 and b"lose-0" in unc.column("value").to_pylist()
    assert (lr.STATS["pieces"] > in_pieces) == pieces


def _grant(bs: str, topic: str, start: int = 0) -> tuple[lr.LocalGrant, lrm.LocalReadGrantResponse]:
    client = NetworkClient(bs, threaded=False)
    try:
        conn = client.node_connection(client.leader_for(topic, 0))
        resp = conn.request(lrm.LocalReadGrantRequest(topic, 0, start, 0))
        grant = lr.request_grant(conn, topic, 0, start, False)
    finally:
        client.close()
    assert grant is not None
    return grant, resp


def _segment_files(b, topic: str) -> list[Path]:
    return sorted((b.data_dir / "logs" / f"{topic}-0").glob("*.log"))


@pytest.mark.parametrize("layout", ["records with headers and nulls", "arrow batches read in pieces"])
@pytest.mark.parametrize(
    "change", ["truncated", "batch removed", "crc", "offsets", "bad header", "rewritten shifted"]
)
def test_a_file_changed_after_the_grant_falls_back_with_no_wrong_row(
    local_broker, topic_name, tmp_path, monkeypatch, change, layout
):
    """The reader's descriptors point at copies of the segments, changed as truncation or an in-place
    rewrite would; the network read (the broker's real files) is the truth."""
    bs, topic = local_broker.bootstrap, topic_name("lrchg")
    if layout == "records with headers and nulls":
        _fill(bs, topic, 2000)
    else:
        monkeypatch.setattr(lr, "PIECES_MIN_BATCH", 0)
        _fill_arrow(bs, topic, 2000, rows_per_batch=40, segment_bytes=20000)
    pieces = lr.STATS["pieces"]
    truth = _table(bs, topic, 0, 2000, "false")
    grant, resp = _grant(bs, topic)
    grant.close()
    files = {int(p.stem): p for p in _segment_files(local_broker, topic)}
    regions = []
    for region in resp.regions:
        seg = max(base for base in files if base <= region.first_offset)
        copy = tmp_path / files[seg].name
        if not copy.exists():
            shutil.copyfile(files[seg], copy)
        regions.append((copy, region))
    from pyspark_logsource.format import iter_headers

    def batches_of(copy: Path, r: lrm.LocalReadRegion) -> list:
        return iter_headers(copy.read_bytes()[r.position : r.position + r.length])

    # a region of two batches or more (how many a segment holds varies with how the producer grouped
    # them), so that "rewritten shifted" has a next batch; the middle one of those
    several = [(c, r) for c, r in regions if len(batches_of(c, r)) >= 2]
    victim, vr = several[len(several) // 2]
    raw = bytearray(victim.read_bytes())
    mid = vr.position + vr.length // 2
    batches = batches_of(victim, vr)
    bpos, h = batches[len(batches) // 2]
    at = vr.position + bpos
    if change == "truncated":
        raw = raw[:mid]
    elif change == "batch removed":
        raw = raw[:at] + raw[at + h.size :]
    elif change == "crc":
        raw[at + h.size - 1] ^= 0xFF
    elif change == "bad header":  # magic 0: the header itself is refused (CorruptRecord)
        raw[at + 16] = 0
    elif change == "offsets":  # read in pieces: the last key offset (the key and value sizes) is wrong
        raw[at + HEADER_SIZE + 12 * h.record_count] ^= 0x40
    else:  # the batch's bytes replaced by the next batch's (a valid batch at the wrong offset)
        nxt = batches[len(batches) // 2 + 1][1]
        raw = raw[:at] + raw[at + h.size : at + h.size + nxt.size] + raw[at + h.size :]
    victim.write_bytes(bytes(raw))
    fds = [os.open(p, os.O_RDONLY) for p, _ in regions]
    forged = lr.LocalGrant(
        grant.end, grant.leader_epoch, [], [(fd, r) for fd, (_, r) in zip(fds, regions, strict=True)]
    )
    before = lr.STATS["fallbacks"]
    reached = [0]
    try:
        got = list(lr.read_local(forged, 0, 2000, 8000, False, True, reached))
    finally:
        forged.close()
    assert lr.STATS["fallbacks"] == before + 1
    assert 0 < reached[0] < 2000
    assert (lr.STATS["pieces"] > pieces) == (layout == "arrow batches read in pieces")
    got += list(read_range(bs, topic, 0, reached[0], 2000, whole_fetches=True, local_read="false"))
    assert pa.Table.from_batches(got).select(COLUMNS).equals(truth)


def test_an_older_grant_request_or_another_host_means_the_network(local_broker, topic_name):
    bs, topic = local_broker.bootstrap, topic_name("lrhost")
    _fill(bs, topic, 50)
    client = NetworkClient(bs, threaded=False)
    try:
        conn = client.node_connection(client.leader_for(topic, 0))
        resp = conn.request(lrm.LocalReadGrantRequest(topic, 0, 0, 0))
        assert resp.token and resp.host_id == lrm.host_id() and Path(resp.socket_path).name == SOCKET_NAME
        # past the high watermark: the Fetch's OffsetOutOfRange, no token
        late = lr.request_grant(conn, topic, 0, 51, False)
        assert late is None
    finally:
        client.close()
    assert lr.redeem(resp.socket_path, resp.token, len(resp.regions)) is not None  # once ...
    assert lr.redeem(resp.socket_path, resp.token, len(resp.regions)) is None  # ... only


# ------------------------------------------------------------------ authorization


def test_an_unauthorized_principal_gets_no_grant(tmp_path):
    d = _short_dir()
    try:
        pki = make_pki(tmp_path / "pki")
        props = broker_properties(
            d,
            pki,
            listeners="SASL_PLAINTEXT://127.0.0.1:0",
            **{
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin",
                "connection.failed.authentication.delay.ms": "0",
            },
        )
        cfg = write_properties(d / "server.properties", props)
        add_users_offline(cfg, d)
        props.pop("log.dirs")
        with broker_process(d, config=props) as b:
            bs = b.bootstrap_on("SASL_PLAINTEXT")

            def opts(user: str) -> dict:
                return {
                    "security_protocol": "SASL_PLAINTEXT",
                    "sasl_mechanism": "SCRAM-SHA-512",
                    "sasl_plain_username": user,
                    "sasl_plain_password": USERS[user],
                }

            def sec(user: str) -> ClientSecurity:
                return ClientSecurity.from_options(opts(user))

            with Admin(bs, **opts("admin")) as a:
                a.create_topic("secret", partitions=1)
            with Producer(bs, **opts("admin")) as p:
                p.send("secret", b"x", partition=0).result()
            for user, allowed in (("alice", False), ("admin", True)):
                client = NetworkClient(bs, threaded=False, security=sec(user))
                try:
                    conn = client.node_connection(client.leader_for("secret", 0) if allowed else 0)
                    if allowed:
                        resp = conn.request(lrm.LocalReadGrantRequest("secret", 0, 0, 0))
                        assert resp.token and resp.regions
                    else:
                        with pytest.raises(TopicAuthorizationFailed):
                            conn.request(lrm.LocalReadGrantRequest("secret", 0, 0, 0))
                        assert lr.request_grant(conn, "secret", 0, 0, False) is None
                finally:
                    client.close()
            with pytest.raises(TopicAuthorizationFailed):
                list(read_range(bs, "secret", 0, 0, 1, whole_fetches=True, security=sec("alice")))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_no_descriptors_while_client_quotas_are_configured(topic_name):
    """A file read is neither measured nor throttled: with a quota configured the grant holds the bounds
    only, and the read goes through Fetch (whose quotas apply)."""
    from support.brokers import broker_thread

    from pyspark_logsource.broker.quotas.model import CONSUMER_BYTE_RATE, QuotaEntity

    d = _short_dir()
    try:
        with broker_thread(d) as b:
            bs, topic = b.bootstrap, topic_name("lrquota")
            _fill(bs, topic, 20)
            b._broker.state.quotas.set_entity(QuotaEntity("someone", None), {CONSUMER_BYTE_RATE: 1e6})
            client = NetworkClient(bs, threaded=False)
            try:
                conn = client.node_connection(client.leader_for(topic, 0))
                resp = conn.request(lrm.LocalReadGrantRequest(topic, 0, 0, 0))
            finally:
                client.close()
            assert (resp.error_code, resp.high_watermark, resp.end_offset) == (0, 20, 20)
            assert resp.token == b"" and resp.regions == []
            before = lr.STATS["unavailable"]
            assert _table(bs, topic, 0, 20, "auto").num_rows == 20
            assert lr.STATS["unavailable"] == before + 1
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_peer_check_refuses_another_user_on_the_socket(monkeypatch):
    """A process of another user connecting to the socket gets REFUSED_PEER and no descriptor, and the
    token stays good for its holder (SO_PEERCRED is what the server reads; another uid cannot be had
    here without root, so the server is told one)."""
    import pyspark_logsource.broker.local_read as blr

    d = _short_dir()
    try:
        data = d / "segment"
        data.write_bytes(b"segment bytes")
        g = Grants()
        server = LocalReadServer(d / SOCKET_NAME, g)
        server.start()
        try:
            token = g.add([os.open(data, os.O_RDONLY)])
            monkeypatch.setattr(blr, "peer_uid", lambda conn: os.geteuid() + 1)
            assert lr.redeem(str(d / SOCKET_NAME), token, 1) is None
            assert g.counts["redeemed"] == 0 and len(g) == 1
            monkeypatch.undo()
            got = lr.redeem(str(d / SOCKET_NAME), token, 1)
            assert got is not None and os.pread(got[0], 7, 0) == b"segment"
            os.close(got[0])
        finally:
            server.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_refused_peer_that_writes_late_gets_the_refusal_not_a_reset(monkeypatch):
    """The server reads a peer's whole request before it refuses it: a reader of another user whose request
    arrives after the server has judged it still gets REFUSED_PEER, not EPIPE on its write or ECONNRESET on
    its read (a refusal sent before the request was read closed the socket under the writer)."""
    import time

    import pyspark_logsource.broker.local_read as blr

    d = _short_dir()
    try:
        g = Grants()
        server = LocalReadServer(d / SOCKET_NAME, g)
        server.start()
        try:
            monkeypatch.setattr(blr, "peer_uid", lambda conn: os.geteuid() + 1)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5.0)
                s.connect(str(d / SOCKET_NAME))
                time.sleep(0.3)  # the server has accepted and could already have answered and closed
                s.sendall(lrm.MAGIC + b"\x01" * lrm.TOKEN_BYTES)
                answer = s.recv(lrm.ANSWER.size)
            assert lrm.ANSWER.unpack(answer) == (lrm.REFUSED_PEER, 0)
            assert g.counts["redeemed"] == g.counts["refused"] == 0  # judged before any token lookup
        finally:
            server.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_granted_descriptors_are_read_only_and_at_most_64(local_broker, topic_name):
    """The reader gets read-only descriptors (reopened, not the broker's read-write ones), at most 64 per
    grant (SCM_RIGHTS carries 253 at most), and reads on over the network past them; a bad isolation
    level is INVALID_REQUEST."""
    bs, topic = local_broker.bootstrap, topic_name("lrcap")
    with Admin(bs) as a:
        a.create_topic(topic, partitions=1, config={"segment.bytes": "16384"})
    with Producer(bs, batch_size=1000, linger_ms=0) as p:
        for i in range(1500):
            p.send(topic, b"value-%06d" % i + bytes(1000), partition=0)  # segments of ~16 KB, the least
        p.flush()
    client = NetworkClient(bs, threaded=False)
    try:
        conn = client.node_connection(client.leader_for(topic, 0))
        with pytest.raises(InvalidRequest, match="isolation level 7"):
            conn.request(lrm.LocalReadGrantRequest(topic, 0, 0, 7))
        grant = lr.request_grant(conn, topic, 0, 0, False)
        assert grant is not None
        try:
            assert len(grant.regions) == blr_max_regions()
            fd, region = grant.regions[0]
            assert os.pread(fd, 8, region.position)
            with pytest.raises(OSError):
                os.write(fd, b"x")
            assert grant.regions[-1][1].first_offset < 1500  # the rest of the log is past the grant
        finally:
            grant.close()
    finally:
        client.close()
    before = dict(lr.STATS)
    local = _table(bs, topic, 0, 1500, "true")
    assert lr.STATS["granted"] == before["granted"] + 1
    assert local.equals(_table(bs, topic, 0, 1500, "false"))
    assert local.column("offset").to_pylist() == list(range(1500))


def blr_max_regions() -> int:
    from pyspark_logsource.broker.local_read import MAX_REGIONS

    return MAX_REGIONS


def test_local_reads_are_off_on_a_standalone_broker_unless_configured():
    from pyspark_logsource.broker.config import BrokerConfig
    from pyspark_logsource.broker.embedded import EmbeddedBroker

    assert not BrokerConfig.from_properties({}).local_read_enable
    assert BrokerConfig.from_properties({"logsource.local.read.enable": "true"}).local_read_enable
    embedded = EmbeddedBroker(_short_dir())
    try:
        assert BrokerConfig.from_properties(embedded._overrides()).local_read_enable
    finally:
        shutil.rmtree(embedded.data_dir, ignore_errors=True)


def test_an_operator_can_switch_local_reads_off(topic_name):
    """logsource.local.read.enable=false: the grant holds the bounds only, no Unix socket is opened, and
    an ``auto`` read goes through Fetch with the same rows; a bad value is a ConfigError at start."""
    from support.brokers import broker_thread

    from pyspark_logsource.broker.config import BrokerConfig
    from pyspark_logsource.broker.local_read import SOCKET_NAME
    from pyspark_logsource.errors import ConfigError

    with pytest.raises(ConfigError, match="logsource.local.read.enable"):
        BrokerConfig.from_properties({"logsource.local.read.enable": "sometimes"})
    d = _short_dir()
    try:
        with broker_thread(d, **{"logsource.local.read.enable": "false"}) as b:
            bs, topic = b.bootstrap, topic_name("lroff")
            _fill(bs, topic, 20)
            client = NetworkClient(bs, threaded=False)
            try:
                conn = client.node_connection(client.leader_for(topic, 0))
                resp = conn.request(lrm.LocalReadGrantRequest(topic, 0, 0, 0))
            finally:
                client.close()
            assert (resp.error_code, resp.high_watermark, resp.end_offset) == (0, 20, 20)
            assert resp.token == b"" and resp.regions == []
            before = lr.STATS["unavailable"]
            assert _table(bs, topic, 0, 20, "auto").num_rows == 20
            assert lr.STATS["unavailable"] == before + 1
            assert not list(Path(d).rglob(SOCKET_NAME))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.spark
def test_spark_tasks_read_locally_the_rows_they_read_over_the_network(spark, topic_name):
    """The data source's tasks (Spark's Python workers) redeem grants: the broker counts them; the
    rows, headers and tombstones equal a ``localRead=false`` read; a bad mode is a clear error."""
    from support.brokers import broker_thread

    from pyspark_logsource.errors import ConfigError
    from pyspark_logsource.spark.options import parse_read_options

    d = _short_dir()
    try:
        with broker_thread(d) as b:
            bs, topic = b.bootstrap, topic_name("lrspark")
            _fill(bs, topic, 2000)
            counts = b._broker.handlers.local_read.grants.counts

            def load(mode: str):
                r = spark.read.format("logsource").option("bootstrap.servers", bs).option("subscribe", topic)
                return r.option("includeHeaders", "true").option("localRead", mode).load()

            before = counts["redeemed"]
            local = load("auto").orderBy("offset").collect()
            assert counts["redeemed"] > before
            redeemed = counts["redeemed"]
            network = load("false").orderBy("offset").collect()
            assert counts["redeemed"] == redeemed
            assert local == network and len(local) == 2000
            assert local[3]["value"] is None and local[13]["headers"] == [("h", b"13")]
        with pytest.raises(ConfigError, match="localRead"):
            parse_read_options(
                {"bootstrap.servers": "x:1", "subscribe": "t", "localRead": "sometimes"}, streaming=False
            )
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_brokers_grant_counts_are_metrics(topic_name):
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = _short_dir()
    try:
        with broker_process(d, config={"metrics.listener": f"http://127.0.0.1:{port}"}) as b:
            bs, topic = b.bootstrap, topic_name("lrmetrics")
            _fill(bs, topic, 100)
            assert _table(bs, topic, 0, 100, "true").num_rows == 100
            _grant(bs, topic)[0].close()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
        got = {
            s.labels["outcome"]: s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == "logsource_local_read_grants_total"
        }
        assert got == {"granted": 3, "redeemed": 2, "refused": 0, "expired": 0}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_received_descriptors_are_close_on_exec(local_broker, topic_name):
    bs, topic = local_broker.bootstrap, topic_name("lrexec")
    _fill(bs, topic, 10)
    grant, _ = _grant(bs, topic)
    try:
        assert grant.regions and all(not os.get_inheritable(fd) for fd, _ in grant.regions)
    finally:
        grant.close()


def test_the_grant_token_stays_out_of_the_response_repr():
    resp = lrm.LocalReadGrantResponse(token=b"\x07" * lrm.TOKEN_BYTES, socket_path="/x/local-read.sock")
    assert "token" not in repr(resp) and repr(b"\x07" * lrm.TOKEN_BYTES) not in repr(resp)
    assert resp.token == b"\x07" * lrm.TOKEN_BYTES
