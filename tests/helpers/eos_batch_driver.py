"""Driver of the exactly-once batch test: df.write with failing first attempts and speculation.

    python eos_batch_driver.py BOOTSTRAP ROWS

A Python UDF (mapInArrow) fails the first attempt of every even partition after 12,000 rows (the
writer stages its first 10,000-row input batch of those attempts: the test counts the aborted rows)
and holds the first attempt of partition 1 until the other three partitions' tasks have ended (the
straggler that speculation looks for; Spark may launch a copy of it). local[2,4] /
spark.task.maxFailures=4, spark.speculation=true.
"""

import os
import shutil
import sys
import tempfile
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
# the tasks' Python workers run on this host (local mode): each attempt that hands all its rows on
# leaves a file here, so the slow attempt waits for a state, not a fixed time
ENDED = tempfile.mkdtemp(prefix="eos-batch-ended-")


def flaky(batches):
    """A Python UDF over Arrow batches (mapInArrow): the first attempt of every even partition
    fails after it has handed 12,000 rows on (the writer staged them); the first attempt of partition
    1 is slow (held until the other partitions have ended, then 1 s more), so Spark may speculate."""
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
                # no wait before failing: the writer, pipelined behind this UDF, staged nothing during the
                # 5 s sleep that was here (measured: the broker's log end stayed 0 throughout it and grew
                # by these 10,000 rows just after the raise). The test checks that both failed attempts'
                # rows were staged (and aborted).
                raise RuntimeError(f"injected failure in the first attempt of partition {p}")
            if first and p == 1 and done == 4000:
                # slow: the last task running, past 1.5x the others' median for 1 s (10 speculation
                # checks), in which a speculative copy of it may run. (Was a fixed 8 s: measured, the
                # other three ended ~4 s into it.) Measured: Spark launched no copy here (local mode: the
                # only host already runs the original); the test's counts hold either way.
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and len(os.listdir(ENDED)) < 3:
                    time.sleep(0.05)
                time.sleep(1.0)
    open(os.path.join(ENDED, f"{p}-{tc.attemptNumber()}"), "w").close()


df = spark.range(0, rows, numPartitions=4).mapInArrow(flaky, "value string")
df.write.format("logsource").option("bootstrap.servers", bootstrap).option("topic", "eos_batch").mode(
    "append"
).save()
print("WROTE", flush=True)
spark.stop()
shutil.rmtree(ENDED, ignore_errors=True)
