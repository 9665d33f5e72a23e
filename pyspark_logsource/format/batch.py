"""The record batch API under its historical module name.

The layout now has one owner per part: ``header.py`` (the 61-byte header,
stamping, the header walker), ``arrow_body.py`` and ``arrow_decode.py`` (our Arrow body),
``kafka.py`` (Kafka's varint records) and ``runs.py`` (runs of batches of
either layout into Arrow). This module re-exports them for existing importers.
"""

from __future__ import annotations

from . import compression  # noqa: F401
from .arrow_body import (  # noqa: F401
    ARROW_SCHEMA,
    HEADER_TYPE,
    MAX_UNCOMPRESSED_BYTES,
    Record,
    encode,
    encode_arrow,
    encode_records,
    from_arrow,
)
from .arrow_decode import (  # noqa: F401
    RecordBatch,
    decode_arrow,
)
from .header import (  # noqa: F401
    ARROW_ATTRIBUTES,
    ARROW_BODY,
    CODEC_MASK,
    CONTROL_BIT,
    CRC_START,
    CREATE_TIME,
    DELETE_HORIZON_BIT,
    EARLIEST_TIMESTAMP,
    HAS_HEADERS,
    HAS_KEY_NULLS,
    HAS_VALUE_NULLS,
    HEADER,
    HEADER_SIZE,
    KAFKA_ATTRIBUTES,
    KNOWN_ATTRIBUTES,
    LATEST_TIMESTAMP,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    TXN_BITS,
    BatchHeader,
    check_header,
    file_headers,
    is_arrow_body,
    iter_headers,
    read_header,
    set_base_offset,
    set_leader_epoch,
    set_producer,
    stamp_append,
    stamp_log_append_time,
    validate,
    verify_crc,
    walk,
    write_header,
)
from .kafka import arrow_to_kafka, kafka_to_arrow_batch, to_kafka  # noqa: F401
from .kafka_decode import KafkaRecordBatch, decode_kafka, validate_kafka_records  # noqa: F401
from .kafka_encode import encode_kafka  # noqa: F401
from .runs import FAST_PATH_MAX_AVG_RECORDS, decode, decode_all, to_arrow, trim  # noqa: F401
