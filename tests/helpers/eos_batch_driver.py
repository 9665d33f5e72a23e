"""Driver of the exactly-once batch test: df.write with failing first attempts and speculation.

    python eos_batch_driver.py BOOTSTRAP ROWS

A Python UDF (mapInArrow) fails the first attempt of every even partition after 12,000 rows (so
those attempts staged data before failing) and slows the first attempt of partition 1
(so Spark launches a speculative copy). local[2,4] / spark.task.maxFailures=4, spark.speculation=true.
"""

import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark import TaskContext  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

bootstrap, rows = sys.argv[1], int(sys.argv[2])
# local[2,4]: in local mode the retry count is the master URL's second number (spark.task.maxFailures
# is for cluster managers); both say 4
spark = (
    SparkSession.builder.master("local[2,4]")
    .config("spark.ui.enabled", "false")
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
                time.sleep(5)  # the writer, pipelined behind this UDF, stages those rows meanwhile
                raise RuntimeError(f"injected failure in the first attempt of partition {p}")
            if first and p == 1 and done == 4000:
                time.sleep(8)  # slow: a speculative copy of this task runs meanwhile


df = spark.range(0, rows, numPartitions=4).mapInArrow(flaky, "value string")
df.write.format("logsource").option("bootstrap.servers", bootstrap).option("topic", "eos_batch").mode(
    "append"
).save()
print("WROTE", flush=True)
spark.stop()
