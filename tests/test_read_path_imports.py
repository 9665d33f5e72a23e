"""What a Spark task's read path imports: a fresh Spark worker pays every import on the path to a
stream's first micro-batch, so decoding a fetched range must not pull in pandas (pyarrow's
``to_numpy`` and ``pa.scalar`` of a Python object import it: ~0.3 s of CPU) nor the producer,
consumer and group clients. Plus the pandas-free helpers against pyarrow's own conversions."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from pyspark_logsource.format import arrow_body
from pyspark_logsource.format.runs import _int64_values
from pyspark_logsource.spark.arrow import _scalar

_CHILD = """
import json, sys
import pyspark_logsource.datasource  # what Spark's worker unpickles
from pyspark_logsource.client.fetch import read_range  # noqa: F401  (what read() imports)
from pyspark_logsource.format import to_arrow
from pyspark_logsource.spark.arrow import to_spark_batches
buf = open(sys.argv[1], "rb").read()
t = to_arrow(buf, 1, 5)
out = to_spark_batches(t.to_batches(), "events", 3, False, 8 << 20)
loaded = [m for m in ("pandas", "pyspark_logsource.client.producer", "pyspark_logsource.client.consumer",
                      "pyspark_logsource.client.txn", "pyspark_logsource.client.group") if m in sys.modules]
# after the check: to_pylist of a timestamp column imports pandas itself
rows = [(r["offset"], r["topic"], r["partition"], r["timestamp"].timestamp()) for r in out[0].to_pylist()]
print(json.dumps({"rows": rows, "loaded": loaded}))
"""


def test_decoding_a_fetched_range_for_spark_imports_no_pandas_nor_other_clients(tmp_path):
    buf = bytes(arrow_body.encode([b"a", b"b", b"c"], timestamps=[1000, 2000, 3000], base_offset=0))
    buf += bytes(arrow_body.encode([b"d", b"e", b"f"], timestamps=[4000, 5000, 6000], base_offset=3))
    path = tmp_path / "run.bin"
    path.write_bytes(buf)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["loaded"] == []
    assert got["rows"] == [[o, "events", 3, (o + 1) * 1.0] for o in range(1, 5)]


@pytest.mark.parametrize(
    ("value", "type_"),
    [
        (0, pa.int32()),
        (-7, pa.int32()),
        (2**31 - 1, pa.int32()),
        (1000, pa.int64()),
        (-(2**63), pa.int64()),
        ("", pa.string()),
        ("events", pa.string()),
        ("héllo-ü", pa.string()),
    ],
)
def test_scalar_built_from_bytes_equals_pa_scalar(value, type_):
    s = _scalar(value, type_)
    assert s.type == type_ and s.is_valid and s == pa.scalar(value, type_)
    assert pa.repeat(s, 3).to_pylist() == [value] * 3


def test_int64_values_of_chunked_sliced_and_null_columns_equal_to_numpy():
    a = pa.array(np.arange(10, dtype=np.int64))
    cases = [
        pa.chunked_array([a]),
        pa.chunked_array([a.slice(3, 4), a.slice(0, 2), a.slice(9)]),
        pa.chunked_array([], type=pa.int64()),
        pa.chunked_array([pa.array([1, None, 3], pa.int64())]),
    ]
    for col in cases:
        got = _int64_values(col)
        if col.null_count:
            np.testing.assert_array_equal(got, col.to_numpy())
        else:
            assert got.dtype == np.int64
            assert got.tolist() == col.to_pylist()
