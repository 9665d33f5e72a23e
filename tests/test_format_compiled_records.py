"""The compiled record builders (format/_crecords.pyx) against the pure-Python reference (issue 25).

* ``kafka_records`` (Kafka's varint records from Arrow columns) is byte-identical to
  ``kafka_encode._records_vectorised`` on generated columns (nulls, empty values, string
  columns, sliced arrays, offset deltas, timestamps over the whole int64 range), and so are
  the batches ``encode_kafka`` / ``arrow_to_kafka`` make with it and without it;
* ``rows`` gives the Messages ``messages_from_arrow`` gives (same type, same fields), on
  tables decoded from generated batches of both layouts, compacted offsets and several chunks;
* what either does not take (another column type, headers, buffers shorter than the array
  says) gives None, and the caller's Python path answers.

Both implementations run in one process (the modules' ``crecords`` set to None for the Python
one), so this module checks the same thing under ``LOGSOURCE_NO_EXTENSIONS=1``.
"""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource import format as F
from pyspark_logsource.client import fetched
from pyspark_logsource.client.fetched import Message, messages_from_arrow
from pyspark_logsource.format import kafka, kafka_encode

try:
    from pyspark_logsource.format import _crecords as cr
except ImportError:  # not built: `python scripts/build_ext.py` or `pip install -e .` builds it
    cr = None
    if os.environ.get("CI"):
        raise
    pytestmark = pytest.mark.skip(reason="the compiled core (format/_crecords) is not built")

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_MODULES = (kafka_encode, fetched)

_opt_bytes = st.one_of(st.none(), st.binary(max_size=300))


def _both(fn):
    """``fn()`` with the Python path, then with the compiled one."""
    saved = [m.crecords for m in _MODULES]
    try:
        out = []
        for impl in (None, cr):
            for m in _MODULES:
                m.crecords = impl
            out.append(fn())
        return out
    finally:
        for m, s in zip(_MODULES, saved, strict=True):
            m.crecords = s


# ---------------------------------------------------------------- Kafka's varint records


@PROPS
@given(
    rows=st.lists(
        st.tuples(_opt_bytes, _opt_bytes, st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**31 - 1)),
        max_size=60,
    ),
    string=st.booleans(),
    with_od=st.booleans(),
    cut=st.integers(0, 5),
)
def test_kafka_records_are_byte_identical(rows, string, with_od, cut):
    keys = [r[0] for r in rows]
    values = [r[1] for r in rows]
    if string:  # string columns: the bytes as latin-1 text keeps any byte value valid UTF-8 after encoding
        keys = [None if k is None else k.decode("latin-1") for k in keys]
        values = [None if v is None else v.decode("latin-1") for v in values]
    typ = pa.string() if string else pa.binary()
    key, value = pa.array(keys, typ), pa.array(values, typ)
    ts = np.array([r[2] for r in rows], dtype=np.int64)
    od = np.array(sorted(r[3] for r in rows), dtype=np.int64) if with_od else None
    # a slice: the arrays' offsets into their buffers and validity bitmaps are honoured
    cut = min(cut, len(rows))
    key, value, ts = key.slice(cut), value.slice(cut), ts[cut:].copy()
    od = od[cut:].copy() if od is not None else None
    want = kafka_encode._records_vectorised(ts, key, value, od)
    got = cr.kafka_records(ts, key, value, od)
    if len(ts) == 0:  # no batch is empty: refused, the caller's reference answers
        assert got is None
    else:
        assert got == want


@PROPS
@given(
    values=st.lists(_opt_bytes, min_size=1, max_size=40),
    keyed=st.booleans(),
    codec=st.sampled_from([0, 1, 3, 4]),
    ts0=st.integers(0, 2**41),
)
def test_kafka_batches_are_byte_identical(values, keyed, codec, ts0):
    keys = [b"k%d" % i if i % 3 else None for i in range(len(values))] if keyed else None
    ts = [ts0 + 7 * i for i in range(len(values))]
    py, co = _both(lambda: F.encode_kafka(values, keys, ts, codec=codec, producer_id=9, base_sequence=4))
    assert co == py
    arrow = F.encode(values, keys, ts, codec=codec)
    py, co = _both(lambda: kafka.arrow_to_kafka(arrow))
    assert co == py
    # and a Kafka client's decoder reads back what went in
    back = F.decode_kafka(co).to_arrow()
    assert back.column("value").to_pylist() == values


def test_kafka_records_with_headers_stay_on_the_python_loop():
    b = F.encode([b"a", b"b"], headers=[[("h", b"1")], None])
    py, co = _both(lambda: kafka.arrow_to_kafka(b))
    assert co == py
    assert F.decode_kafka(co).to_arrow().column("headers").to_pylist()[0] == [{"key": "h", "value": b"1"}]


def test_kafka_records_refuse_what_they_do_not_take():
    ts = np.zeros(2, dtype=np.int64)
    v = pa.array([b"a", b"b"])
    assert cr.kafka_records(ts, pa.array([b"a", b"b"], pa.large_binary()), v) is None  # 64-bit offsets
    assert cr.kafka_records(ts, v.slice(1), v) is None  # a column of another length
    assert cr.kafka_records(ts, v, v, np.zeros(3, dtype=np.int64)) is None  # offset deltas
    with pytest.raises((TypeError, ValueError)):
        cr.kafka_records(np.zeros(2, dtype=np.int32), v, v)  # timestamps deltas must be int64


# ---------------------------------------------------------------- the consumer's Messages


def _fetch(batches):
    return b"".join(bytes(b) for b in batches)


@PROPS
@given(
    runs=st.lists(
        st.tuples(
            st.lists(st.tuples(_opt_bytes, _opt_bytes), min_size=1, max_size=20),
            st.booleans(),  # Kafka's layout (else our Arrow body)
            st.integers(0, 2**41),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_messages_are_identical(runs):
    batches, base = [], 0
    for recs, kafka_layout, ts0 in runs:
        keys = [k for k, _ in recs]
        values = [v for _, v in recs]
        ts = [ts0 + i for i in range(len(recs))]
        enc = F.encode_kafka if kafka_layout else F.encode
        b = enc(values, keys, ts)
        F.set_base_offset(b, base)
        base += len(recs) + 3  # gaps between batches: offsets are read, not counted
        batches.append(b)
    table = F.to_arrow(_fetch(batches))
    for t in (table, pa.concat_tables([table.slice(0, 1), table.slice(1)])):  # one chunk and several
        py, co = _both(lambda t=t: messages_from_arrow("topic", 3, t))
        assert co == py
        assert all(type(m) is Message for m in co)
        assert [m._asdict() for m in co] == [m._asdict() for m in py]


def test_messages_with_headers_and_other_columns_take_the_python_path():
    t = F.to_arrow(F.encode([b"a", b"b"], headers=[None, [("h", b"1")]]))
    assert cr.rows(t, Message, "t", 0, ()) is None
    py, co = _both(lambda: messages_from_arrow("t", 0, t))
    assert co == py and co[1].headers == (("h", b"1"),)
    assert cr.rows(t, tuple, "t", 0, ()) is None  # not a 7-field row type: headers decide first here
    plain = F.to_arrow(F.encode([b"a"]))
    assert cr.rows(plain, dict, "t", 0, ()) is None  # not a tuple type
    odd = plain.set_column(2, "offset", pa.array([1], pa.int32()))
    assert cr.rows(odd, Message, "t", 0, ()) is None


def test_messages_hold_no_extra_references_and_need_no_collector():
    t = F.to_arrow(F.encode([b"v%d" % i for i in range(100)]))
    topic = "refcounted-topic"
    before = sys.getrefcount(topic)
    msgs = cr.rows(t, Message, topic, 0, ())
    assert sys.getrefcount(topic) == before + 100
    # atomic fields only: no cycle possible, so the rows are not tracked by the collector
    assert not any(gc.is_tracked(m) for m in msgs)
    assert msgs[7].value == b"v7" and msgs[7].offset == 7 and msgs[7] == tuple(msgs[7])
    del msgs
    assert sys.getrefcount(topic) == before


# ---------------------------------------------------------------- frame buffers (protocol.connection)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 200_000), min_size=1, max_size=4),
    st.lists(st.integers(1, 90_000), min_size=1, max_size=20),
    st.booleans(),
    st.integers(0, 255),
)
def test_frames_in_unfilled_buffers_are_the_frames_received(sizes, cuts, direct, fill):
    """``unfilled_bytearray`` (a frame buffer not zero-filled) gives the same frames as ``bytearray``
    for frames large enough to be filled in place, received in any pieces through ``feed`` or
    through ``unfilled()``/``filled()``: a frame is handed on only once every byte was received."""
    from pyspark_logsource.protocol import connection

    stream = b"".join(
        len(f).to_bytes(4, "big") + f for f in (bytes([(fill + i) % 256]) * s for i, s in enumerate(sizes))
    )

    def receive(new_frame) -> list[bytes]:
        saved = connection._new_frame
        connection._new_frame = new_frame
        try:
            dec = connection.FrameDecoder(max_frame_bytes=1 << 20)
            out, pos, k = [], 0, 0
            while pos < len(stream):
                n = cuts[k % len(cuts)]
                k += 1
                room = dec.unfilled()
                if direct and room is not None:
                    n = min(n, len(room))
                    room[:n] = stream[pos : pos + n]
                    got = dec.filled(n)
                else:
                    got = dec.feed(stream[pos : pos + n])
                out += [bytes(f) for f in got]
                pos += n
            assert dec.buffered == 0
            return out
        finally:
            connection._new_frame = saved

    assert (
        receive(cr.unfilled_bytearray)
        == receive(bytearray)
        == [bytes([(fill + i) % 256]) * s for i, s in enumerate(sizes)]
    )
    assert type(cr.unfilled_bytearray(5)) is bytearray and len(cr.unfilled_bytearray(0)) == 0
    with pytest.raises(ValueError):
        cr.unfilled_bytearray(-1)
