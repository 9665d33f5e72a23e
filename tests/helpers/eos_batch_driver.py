"""Driver of the exactly-once batch test: df.write with failing first attempts and speculation.

    python eos_batch_driver.py BOOTSTRAP ROWS

A Python UDF (mapInArrow) fails the first attempt of every even partition after 12,000 rows (the
writer stages its first 10,000-row input batch of those attempts: the test counts the aborted rows)
and slows the first attempt of partition 1 (so Spark may launch a speculative copy).
local[2,4] / spark.task.maxFailures=4, spark.speculation=true.
"""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the support package

from pyspark import TaskContext  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from support.spark_jvm import driver_java_options  # noqa: E402

bootstrap, rows = sys.argv[1], int(sys.argv[2])
# local[2,4]: in local mode the retry count is the master URL's second number (spark.task.maxFailures
# is for cluster managers); both say 4. The JVM options of the tests' short-lived drivers (C1 only, the
# serial GC, the session's class-data archive: tests/support/spark_jvm.py) cut the start's CPU; the job
# is the same
spark = (
    SparkSession.builder.master("local[2,4]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.extraJavaOptions", driver_java_options())
    .config("spark.task.maxFailures", "4")
    .config("spark.speculation", "true")
    .config("spark.speculation.interval", "100ms")
    .config("spark.speculation.multiplier", "1.5")
    .config("spark.speculation.quantile", "0.5")
    .config("spark.speculation.minTaskRuntime", "200ms")
    .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")


def flaky(batches):
    """A Python UDF over Arrow batches (mapInArrow): the first attempt of every even partition
    fails after it has handed 12,000 rows on (the writer staged them); the first attempt of partition
    1 is slow, so Spark speculates."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tc = TaskContext.get()
    first, p = tc.attemptNumber() == 0, tc.partitionId()
    done = 0
    for b in batches:
        for i in range(0, b.num_rows, 2000):
            part = b.slice(i, 2000)
            values = pc.binary_join_element_wise(pa.scalar("row-"), pc.cast(part.column(0), pa.string()), "")
            yield pa.RecordBatch.from_arrays([values], ["value"])
            done += part.num_rows
            if first and p % 2 == 0 and done == 12000:  # past the writer's first input batch (10,000 rows)
                # no wait before failing: the writer, pipelined behind this UDF, gets its 10,000 rows only
                # when the worker flushes its output, which the failure does, and stages them then (a 5 s
                # sleep here was measured to stage nothing during it: the broker's log end stayed 0 until
                # the raise). The test checks that both failed attempts' rows were staged and aborted.
                raise RuntimeError(f"injected failure in the first attempt of partition {p}")
            if first and p == 1 and done == 4000:
                time.sleep(8)  # slow: a speculative copy of this task runs meanwhile


df = spark.range(0, rows, numPartitions=4).mapInArrow(flaky, "value string")
df.write.format("logsource").option("bootstrap.servers", bootstrap).option("topic", "eos_batch").mode(
    "append"
).save()
print("WROTE", flush=True)
spark.stop()
