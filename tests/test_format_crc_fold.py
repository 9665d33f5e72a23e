"""The compiled core's folding CRC-32C (format/_crc32c_fold.h, issue 25) against the reference
``format.crc.crc32c``: the same value on every length and alignment, and the log append's checks give
the same answers with it as without it.

It runs from 256 bytes where the CPU has AVX-512 VPCLMULQDQ (a runtime check; elsewhere, or with the
extensions switched off, these tests check that it is not in use and the reference CRC is).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_logsource.broker.log import LogConfig, PartitionLog
from pyspark_logsource.errors import CorruptRecord
from pyspark_logsource.format import encode as fmt_encode
from pyspark_logsource.format import plain_run
from pyspark_logsource.format.crc import crc32c

try:
    from pyspark_logsource.format import _cbody as cb
except ImportError:  # not built: `python scripts/build_ext.py` builds it in place
    cb = None
    if os.environ.get("CI"):
        raise

needs_cbody = pytest.mark.skipif(cb is None, reason="format/_cbody is not built: pure-Python path only")
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def fold():
    """Whether the folding CRC is in use (it is switched on again after the test)."""
    on = cb.set_crc32c_fold(True)
    yield on
    cb.set_crc32c_fold(True)


@needs_cbody
@PROPS
@given(st.binary(min_size=0, max_size=3000), st.integers(0, 63))
def test_the_folding_crc_gives_the_references_value(data, skip):
    """Every length (the 256-byte lanes, the 64-byte fold, the crc32q tail) at every alignment."""
    view = memoryview(data)[min(skip, len(data)) :]
    got = cb.crc32c_fold_direct(view)
    if got is None:  # under 256 bytes, or a CPU without the instructions
        assert len(view) < 256 or not cb.set_crc32c_fold(True)
    else:
        assert got == crc32c(view)


@needs_cbody
@pytest.mark.parametrize("n", [256, 257, 319, 320, 511, 512, 513, 767, 768, 1023, 1024, 10_900, 65_539])
def test_the_folding_crc_on_lane_edges(n, fold):
    data = os.urandom(n + 1)[1:]  # not 64-byte aligned
    want = crc32c(data)
    assert cb.crc32c_fold_direct(data) == (want if fold else None)
    assert cb.crc32c_fold_direct(bytes(n)) in (crc32c(bytes(n)), None)


@needs_cbody
def test_it_is_in_use_where_the_cpu_runs_it(fold):
    """On a CPU with the instructions it checked out at import (a wrong value there turns it off)."""
    assert fold is cb.crc32c_fold_supported()


@needs_cbody
def test_switched_off_it_is_not_used(fold):
    data = os.urandom(1000)
    assert cb.set_crc32c_fold(False) is False
    assert cb.crc32c_fold_direct(data) is None
    assert cb.set_crc32c_fold(True) is fold


def _batch(values: int) -> bytearray:
    return bytearray(fmt_encode([os.urandom(200) for _ in range(values)], None, 5))


@needs_cbody
@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60), st.data())
def test_the_append_check_refuses_a_flipped_bit_anywhere_under_the_crc(values, data):
    """check_and_stamp (folding CRC for these batches of 400 B to 12 KB) refuses a batch with one bit
    flipped under its CRC, as the reference does, and stamps the intact batch as the reference does."""
    cb.set_crc32c_fold(True)
    batch = _batch(values)
    assert len(batch) >= 256
    good_c, good_py = bytearray(batch), bytearray(batch)
    assert cb.check_and_stamp(1 << 20, False, good_c, 7, 1) == plain_run.check_and_stamp_py(
        1 << 20, False, good_py, 7, 1
    )
    assert good_c == good_py
    pos = data.draw(st.integers(21, len(batch) - 1))
    bad = bytearray(batch)
    bad[pos] ^= 1 << data.draw(st.integers(0, 7))
    assert cb.check_and_stamp(1 << 20, False, bad, 7, 1) is None
    assert plain_run.check_and_stamp_py(1 << 20, False, bytearray(bad), 7, 1) is None
    assert bad[:8] == batch[:8] and bad[12:16] == batch[12:16]  # nothing stamped


@needs_cbody
def test_the_log_answers_a_flipped_body_bit_with_corrupt_message(tmp_path, fold):
    """The log's one-call append (write_plain_batch, folding CRC) refuses a 10 KB batch with one body
    bit flipped: CorruptRecord (Kafka's CORRUPT_MESSAGE, code 2), nothing written; the intact batch is
    appended."""
    batch = _batch(50)
    lg = PartitionLog(tmp_path / "t-0", LogConfig(), "t", 0)
    try:
        for pos in (61, len(batch) // 2, len(batch) - 1):
            bad = bytearray(batch)
            bad[pos] ^= 0x10
            with pytest.raises(CorruptRecord) as e:
                lg.append(bad)
            assert e.value.code == 2
            assert lg.log_end_offset == 0 and lg.segments[-1].size == 0
        assert lg.append(bytearray(batch))[:2] == (0, 49)
    finally:
        lg.close()


@needs_cbody
@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=6), st.data())
def test_the_fetch_walk_refuses_a_flipped_bit_with_the_fold_as_without(sizes, data):
    """The fetch walk (``_ckafka.walk``; the folding CRC from 256 bytes where it is in use) gives the same
    headers with the fold on and off, and with one bit flipped under a batch's CRC it refuses the run
    both ways, as the reference does (CorruptRecord from ``header.walk``)."""
    from pyspark_logsource.format import header

    run = b"".join(bytes(_batch(n)) for n in sizes)
    pos = data.draw(st.integers(0, len(run) - 1))
    bad = bytearray(run)
    bad[pos] ^= 1 << data.draw(st.integers(0, 7))
    got = []
    try:
        for on in (True, False):
            cb.set_crc32c_fold(on)
            got.append(header.walk(run, check_crc=True))
            try:
                walked = header.walk(bytes(bad), check_crc=True)
            except CorruptRecord:
                walked = None
            got.append(walked)
    finally:
        cb.set_crc32c_fold(True)
    assert got[0] == got[2] and len(got[0]) == len(sizes)
    assert got[1] == got[3]
    for at, h in got[0]:
        if at + 21 <= pos < at + h.size:  # a bit under this batch's CRC (the walk's concern)
            assert got[1] is None


@needs_cbody
@PROPS
@given(st.binary(min_size=0, max_size=3000), st.integers(0, 63), st.integers(0, 2**32 - 1), st.booleans())
def test_a_crc_continued_over_pieces_is_the_reference_s(data, skip, value, on):
    """``crc32c_update`` (a direct read's CRC over a batch read in pieces) with and without the fold."""
    view = memoryview(data)[min(skip, len(data)) :]
    try:
        cb.set_crc32c_fold(on)
        assert cb.crc32c_update(view, value) == crc32c(view, value)
    finally:
        cb.set_crc32c_fold(True)
    cut = len(view) // 3
    assert cb.crc32c_update(view[cut:], cb.crc32c_update(view[:cut], 0)) == crc32c(view)
