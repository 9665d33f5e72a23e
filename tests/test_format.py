"""Example tests of the record batch format: typed errors, bounded allocation, zero-copy, fast path."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import crcmod.predefined
import numpy as np
import pyarrow as pa
import pytest

from pyspark_logsource.errors import (
    CorruptRecord,
    InvalidRequest,
    InvalidTimestamp,
    MessageTooLarge,
    UnsupportedCompressionType,
    error_for_code,
)
from pyspark_logsource.format import batch as B
from pyspark_logsource.format import compression as C
from pyspark_logsource.format.crc import IMPLEMENTATION, crc32c

CODECS = ["none", "gzip", "lz4", "zstd"]


def _reseal(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return buf


def _crafted(attrs: int, body: bytes, n: int = 1, arrow: bool = True) -> bytearray:
    """A batch with a sane header over ``body`` and a correct CRC (an Arrow body unless ``arrow=False``)."""
    buf = bytearray(B.HEADER_SIZE) + body
    attrs |= B.ARROW_BODY if arrow else 0
    B.HEADER.pack_into(buf, 0, 0, len(buf) - 12, 0, B.MAGIC, 0, attrs, n - 1, 0, 0, -1, -1, -1, n)
    return _reseal(buf)


# ---------------------------------------------------------------- CRC


def test_crc32c_known_vector_and_fallback_agree():
    assert crc32c(b"123456789") == 0xE3069283
    slow = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    data = np.random.default_rng(1).bytes(100_003)
    assert crc32c(data) == slow(data)
    assert crc32c(memoryview(bytearray(data))[7:]) == slow(data[7:])
    assert IMPLEMENTATION in {"crc32c", "google-crc32c", "crcmod"}


# ---------------------------------------------------------------- encode errors


def test_encode_rejects_bad_input_with_typed_errors():
    with pytest.raises(InvalidRequest):
        B.encode([])
    with pytest.raises(InvalidRequest):
        B.encode([b"a", b"b"], keys=[b"k"])
    with pytest.raises(InvalidRequest):
        B.encode([b"a"], timestamps=[1, 2])
    with pytest.raises(InvalidRequest):
        B.encode([b"a"], headers=[[("k", b"v")], None])
    with pytest.raises(InvalidRequest):
        B.encode(["text is not bytes"])
    with pytest.raises(InvalidRequest):
        B.encode([b"a"], keys=[42])
    with pytest.raises(InvalidRequest):
        B.encode([b"a"], headers=[[(b"bytes key", b"v")]])
    with pytest.raises(UnsupportedCompressionType):
        B.encode([b"a"], codec="brotli")
    with pytest.raises(UnsupportedCompressionType):
        B.encode([b"a"], codec=7)
    e = error_for_code(UnsupportedCompressionType.code, "x")
    assert isinstance(e, UnsupportedCompressionType)


def test_encode_arrow_rejects_bad_input():
    with pytest.raises(InvalidRequest):
        B.encode_arrow(pa.table({"payload": [b"x"]}))
    with pytest.raises(InvalidRequest):
        B.encode_arrow(pa.table({"value": [1, 2]}))
    with pytest.raises(InvalidRequest):
        B.encode_arrow(pa.table({"value": pa.array([], pa.binary())}))
    bad_headers = pa.array(
        [[{"key": None, "value": b"v"}]], pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    )
    with pytest.raises(InvalidRequest):
        B.encode_arrow(pa.table({"value": [b"x"], "headers": bad_headers}))


def test_tombstones_and_null_keys_survive():
    buf = B.encode([None, b"", b"v"], keys=[b"k", None, b""], timestamps=[5, 6, 7], codec="lz4")
    recs = B.decode(buf).records()
    assert [(r.key, r.value) for r in recs] == [(b"k", None), (None, b""), (b"", b"v")]
    rb = B.decode(buf).to_arrow()
    assert rb.column("value").null_count == 1 and rb.column("key").null_count == 1


def test_validate_enforces_max_size():
    buf = B.encode([b"x" * 1000])
    assert B.validate(buf, max_size=len(buf)).size == len(buf)
    with pytest.raises(MessageTooLarge):
        B.validate(buf, max_size=len(buf) - 1)


# ---------------------------------------------------------------- hostile headers and bodies


def test_unsupported_codec_ids_in_a_batch():
    for codec in (5, 6, 7):
        buf = _crafted(codec, struct.pack("<I", 10) + b"\0" * 10)
        with pytest.raises(UnsupportedCompressionType):
            B.decode(buf)


def test_a_body_claiming_4gib_is_refused_before_decompressing():
    for codec in (C.GZIP, C.LZ4, C.ZSTD):
        body = struct.pack("<I", 0xFFFFFFFF) + C.compress(codec, b"\0" * 64)
        with pytest.raises(CorruptRecord, match="more than"):
            B.decode(_crafted(codec, body))
        # a caller's tighter bound wins
        small = struct.pack("<I", 2048) + C.compress(codec, b"\0" * 2048)
        with pytest.raises(CorruptRecord, match="more than 1024"):
            B.decode(_crafted(codec, small), max_uncompressed=1024)


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_a_body_claiming_1gib_never_allocates_it(codec):
    """Under an address-space limit 300 MiB above the current size, a 1 GiB claim must fail as
    CorruptRecord after decompressing a few bytes, not with MemoryError from a pre-allocation."""
    script = textwrap.dedent(f"""
        import resource, struct, sys
        from pyspark_logsource.format import batch as B, compression as C
        from pyspark_logsource.errors import CorruptRecord
        sys.path.insert(0, {str(__file__.rsplit("/", 1)[0])!r})
        from test_format import _crafted
        cid = C.codec_id({codec!r})
        buf = _crafted(cid, struct.pack("<I", (1 << 30) - 1) + C.compress(cid, b"x" * 100))
        vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + 300 * 2**20, resource.RLIM_INFINITY))
        try:
            B.decode(buf)
        except CorruptRecord as e:
            print("CORRUPT", e)
        except MemoryError:
            print("MEMORYERROR")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "CORRUPT batch body decompressed to 100 bytes" in out.stdout, out.stdout + out.stderr


def test_a_decompression_bomb_stops_at_the_declared_size():
    # 64 MiB of zeros compresses to a few KiB; a header that says 1 MiB gets 1 MiB + 1 at most
    bomb = C.compress(C.ZSTD, bytes(64 << 20))
    with pytest.raises(CorruptRecord, match="header says 1048576"):
        B.decode(_crafted(C.ZSTD, struct.pack("<I", 1 << 20) + bomb))


def test_huge_record_count_with_tiny_body_is_corrupt():
    for attrs in (0, B.HAS_HEADERS, B.HAS_KEY_NULLS | B.HAS_VALUE_NULLS):
        with pytest.raises(CorruptRecord):
            B.decode(_crafted(attrs, b"\0" * 64, n=2**31 - 1))


def test_header_count_beyond_the_body_is_corrupt():
    buf = B.encode([b"v"], headers=[[("k", b"v")]])
    body = bytearray(buf[B.HEADER_SIZE :])
    struct.pack_into("<i", body, 8 + 8 + 8 + 4, 2**31 - 1)  # hdr_list[1]: the header count
    with pytest.raises(CorruptRecord, match="headers"):
        B.decode(_crafted(B.read_header(buf).attributes, bytes(body)))
    struct.pack_into("<i", body, 8 + 8 + 8 + 4, -1)
    with pytest.raises(CorruptRecord):
        B.decode(_crafted(B.read_header(buf).attributes, bytes(body)))


def test_invalid_utf8_header_key_is_corrupt():
    buf = B.encode([b"v"], headers=[[("ab", b"v")]])
    i = bytes(buf).rindex(b"ab")
    buf[i] = 0xFF
    with pytest.raises(CorruptRecord, match="UTF-8"):
        B.decode(_reseal(buf))


def test_impossible_lengths_never_loop_or_allocate():
    good = bytes(B.encode([b"a"]))
    for length in (-12, -1, 0, 48):  # smaller than a header: must not make the walk stand still
        bad = bytearray(good)
        struct.pack_into(">i", bad, 8, length)
        with pytest.raises(CorruptRecord):
            list(B.iter_headers(bytes(bad) + good))
        with pytest.raises(CorruptRecord):
            B.to_arrow(bytes(bad) + good)
    huge = bytearray(good)
    struct.pack_into(">i", huge, 8, 2**31 - 1)
    with pytest.raises(CorruptRecord, match="truncated"):
        B.decode(huge)
    assert list(B.iter_headers(good + bytes(huge))) == [(0, B.read_header(good))]


def test_unknown_magic_and_attributes_are_corrupt():
    buf = bytearray(B.encode([b"a"]))
    buf[16] = 1
    with pytest.raises(CorruptRecord, match="magic"):
        B.read_header(buf)
    buf = bytearray(B.encode([b"a"]))
    struct.pack_into(">h", buf, 21, 0x4000)
    with pytest.raises(CorruptRecord, match="attributes"):
        B.decode(_reseal(buf))


# ---------------------------------------------------------------- zero copy and alignment


@pytest.mark.parametrize("shift", range(8))
def test_decode_at_any_alignment_is_zero_copy_for_the_data(shift):
    vals = [bytes([i]) * (i + 1) for i in range(50)]
    batch = bytes(B.encode(vals, keys=[b"k"] * 50, timestamps=list(range(50))))
    buf = bytearray(shift) + batch
    rb = B.decode(buf, shift)
    arrow = rb.to_arrow()
    arrow.validate(full=True)
    assert arrow.column("value").to_pylist() == vals
    data = arrow.column("value").buffers()[2]
    base = pa.py_buffer(buf).address
    assert base <= data.address < base + len(buf)  # values point into the input, not a copy
    for col in ("offset", "timestamp"):
        assert arrow.column(col).buffers()[1].address % 8 == 0
    assert arrow.column("value").buffers()[1].address % 4 == 0


# ---------------------------------------------------------------- runs of batches


def _mixed_run() -> tuple[bytes, list]:
    rng = np.random.default_rng(7)
    parts, want, off = [], [], 100
    for i in range(60):
        n = int(rng.integers(1, 5))
        vals = [None if rng.random() < 0.2 else rng.bytes(int(rng.integers(0, 30))) for _ in range(n)]
        keys = None if i % 3 == 0 else [None if rng.random() < 0.3 else rng.bytes(3) for _ in range(n)]
        ts = [int(t) for t in rng.integers(0, 2**40, n)]
        headers = [[("h", b"1")]] * n if i % 7 == 3 else None
        codec = "lz4" if i % 11 == 5 else "none"
        buf = B.encode(vals, keys, ts, headers, codec=codec, base_offset=off)
        if i % 5 == 4:
            B.stamp_log_append_time(buf, 1_700_000_000_000 + i)
            ts = [1_700_000_000_000 + i] * n
        parts.append(bytes(buf))
        want += list(zip(range(off, off + n), ts, keys or [None] * n, vals, strict=True))
        off += n
    return b"".join(parts), want


def test_fast_and_general_paths_agree_on_a_mixed_run():
    buf, want = _mixed_run()
    general = B.to_arrow(buf, fast=False)
    fast = B.to_arrow(buf, fast=True)
    auto = B.to_arrow(buf)
    for t in (general, fast, auto):
        t.validate(full=True)
        assert t.schema == B.ARROW_SCHEMA
    assert fast.equals(general) and auto.equals(general)
    got = list(
        zip(
            fast.column("offset").to_pylist(),
            fast.column("timestamp").cast(pa.int64()).to_pylist(),
            fast.column("key").to_pylist(),
            fast.column("value").to_pylist(),
            strict=True,
        )
    )
    assert got == want
    assert B.to_arrow(buf, 150, 170, fast=True).equals(B.to_arrow(buf, 150, 170, fast=False))
    # a trailing partial batch is ignored by both paths
    assert B.to_arrow(buf + buf[:100], fast=True).equals(general)


def test_fast_path_reports_a_corrupt_batch_in_the_middle():
    parts = [bytes(B.encode([b"v%d" % i], base_offset=i)) for i in range(20)]
    bad = bytearray(parts[10])
    bad[-1] ^= 1
    buf = b"".join(parts[:10]) + bytes(bad) + b"".join(parts[11:])
    with pytest.raises(CorruptRecord, match="CRC"):
        B.to_arrow(buf, fast=True)
    # structurally bad but CRC-valid (a producer bug): still CorruptRecord, never garbage
    body_bad = bytearray(parts[10])
    struct.pack_into("<i", body_bad, B.HEADER_SIZE + 8 + 4, 1000)  # key_off[1] past the data
    buf = b"".join(parts[:10]) + bytes(_reseal(body_bad)) + b"".join(parts[11:])
    with pytest.raises(CorruptRecord):
        B.to_arrow(buf, fast=True)
    # without CRC checks the structural checks still hold
    with pytest.raises(CorruptRecord):
        B.to_arrow(buf, fast=True, check_crc=False)


def test_empty_input_gives_an_empty_table():
    for buf in (b"", b"\0" * 10, bytes(B.encode([b"x"]))[:-1]):
        t = B.to_arrow(buf)
        assert t.num_rows == 0 and t.schema == B.ARROW_SCHEMA


def test_trim_on_an_empty_and_a_full_table():
    t = B.to_arrow(b"".join(bytes(B.encode([b"a", b"b"], base_offset=o)) for o in (10, 12, 14)))
    assert B.trim(t, None, None).num_rows == 6
    assert B.trim(t, 11, 15).column("offset").to_pylist() == [11, 12, 13, 14]
    assert B.trim(t, 100, None).num_rows == 0
    assert B.trim(t, None, 0).num_rows == 0
    assert B.trim(t, 15, 11).num_rows == 0
    assert B.trim(B.ARROW_SCHEMA.empty_table(), 1, 2).num_rows == 0


def test_encode_arrow_rejects_a_non_time_timestamp_column():
    with pytest.raises(InvalidRequest, match="timestamp"):
        B.encode_arrow(pa.table({"value": [b"x"], "timestamp": ["yesterday"]}))
    got = B.decode(
        B.encode_arrow(pa.table({"value": [b"x"], "timestamp": pa.array([5], pa.int32())}))
    ).records()
    assert got[0].timestamp == 5


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(values=[b"a"], timestamps=[2**70]), InvalidTimestamp),
        (dict(values=[b"a"], timestamps=2**70), InvalidTimestamp),
        (dict(values=[b"a"], timestamps=["x"]), InvalidTimestamp),
        (dict(values=[b"a"], base_offset=2**64), InvalidRequest),
        (dict(values=[b"a"], producer_epoch=2**20), InvalidRequest),
        (dict(values=[memoryview(b"abcd").cast("I")]), InvalidRequest),  # len() counts items, not bytes
        (dict(values=b"abc"), InvalidRequest),
        (dict(values=[1]), InvalidRequest),
        (dict(values=[None, "x"]), InvalidRequest),
        (dict(values=[b"a"], headers=[[("k", "str")]]), InvalidRequest),
        (dict(values=[b"a"], headers=[[("k",)]]), InvalidRequest),
    ],
)
def test_encode_never_writes_a_bad_batch(kwargs, error):
    values = kwargs.pop("values")
    with pytest.raises(error):
        B.encode(values, **kwargs)


def test_numpy_scalar_timestamp_and_buffer_values():
    buf = B.encode([bytearray(b"ab"), memoryview(b"cd")], timestamps=np.int64(5))
    assert [(r.timestamp, r.value) for r in B.decode(buf).records()] == [(5, b"ab"), (5, b"cd")]


def test_offsets_that_wrap_around_int32_are_corrupt_on_every_path():
    """[0, 2e9, -2e9, 12]: each step's int32 difference wraps to a positive number, so a check by
    subtraction would pass it and Arrow would read 2 GB past the data (found by fuzzing)."""
    buf = B.encode([b"aaaa", b"bbbb", b"cccc"], timestamps=1)
    value_off = B.HEADER_SIZE + 3 * 8 + 4 * 4
    struct.pack_into("<4i", buf, value_off, 0, 2_000_000_000, -2_000_000_000, 12)
    bad = bytes(_reseal(buf))
    with pytest.raises(CorruptRecord, match="decrease"):
        B.decode(bad)
    run = bad + bad
    for fast in (None, True, False):
        with pytest.raises(CorruptRecord, match="decrease"):
            B.to_arrow(run, fast=fast)


def test_a_batch_ending_past_the_largest_offset_is_corrupt():
    buf = B.encode([b"a", b"b"], timestamps=1)
    B.set_base_offset(buf, 2**63 - 2)
    assert B.validate(buf).last_offset == 2**63 - 1
    B.set_base_offset(buf, 2**63 - 1)
    with pytest.raises(CorruptRecord, match="int64"):
        B.validate(buf)
    for fast in (True, False):
        with pytest.raises(CorruptRecord, match="int64"):
            B.to_arrow(bytes(buf) * 2, fast=fast)


def test_a_partial_tail_with_an_impossible_header_is_corrupt_on_every_path():
    good = bytes(B.encode([b"a"]))
    tail = bytearray(B.encode([b"b", b"c"]))
    struct.pack_into(">i", tail, 57, 5)  # record count no longer matches the last offset delta
    buf = good + bytes(tail[:-3])
    with pytest.raises(CorruptRecord, match="record count"):
        list(B.iter_headers(buf))
    for fast in (None, True, False):
        with pytest.raises(CorruptRecord, match="record count"):
            B.to_arrow(buf, fast=fast)


def test_to_arrow_honours_max_uncompressed_on_both_paths():
    run = b"".join(bytes(B.encode([b"x" * 100], codec="zstd", base_offset=i)) for i in range(3))
    assert B.to_arrow(run, max_uncompressed=200).num_rows == 3
    for fast in (True, False):
        with pytest.raises(CorruptRecord, match="more than 50"):
            B.to_arrow(run, fast=fast, max_uncompressed=50)


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_of_a_full_featured_batch_is_corrupt(codec):
    buf = bytes(
        B.encode(
            [b"v1", None, b"v3" * 20],
            keys=[None, b"k2", b"k3"],
            timestamps=[3, 1, 2],
            headers=[[("a", b"1")], None, [("b", None), ("c", b"")]],
            codec=codec,
            producer_id=7,
            producer_epoch=1,
            base_sequence=5,
        )
    )
    for cut in range(len(buf)):
        part = buf[:cut]
        with pytest.raises(CorruptRecord):
            B.decode(part)
        with pytest.raises(CorruptRecord):
            B.validate(part)
        assert B.to_arrow(part).num_rows == 0
    assert len(B.decode(buf).records()) == 3
