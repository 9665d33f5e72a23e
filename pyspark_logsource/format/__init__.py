"""The record batch format shared by producer, broker and consumer."""

from .batch import (  # noqa: F401
    ARROW_SCHEMA,
    HEADER_SIZE,
    BatchHeader,
    Record,
    RecordBatch,
    decode,
    decode_all,
    encode,
    encode_arrow,
    iter_headers,
    read_header,
    to_arrow,
    trim,
    validate,
)
