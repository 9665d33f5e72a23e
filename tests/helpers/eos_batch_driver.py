"""Driver of the exactly-once batch test: df.write with failing first attempts and speculation.

    python eos_batch_driver.py BOOTSTRAP ROWS

A UDF fails the first attempt of every even partition after 300 rows (so those
attempts staged data before failing) and slows the first attempt of partition 1
(so Spark launches a speculative copy). spark.task.maxFailures=4, spark.speculation=true.
"""

import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark import TaskContext  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

bootstrap, rows = sys.argv[1], int(sys.argv[2])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.task.maxFailures", "4").config("spark.speculation", "true")
         .config("spark.speculation.interval", "100ms").config("spark.speculation.multiplier", "1.5")
         .config("spark.speculation.quantile", "0.5").config("spark.speculation.minTaskRuntime", "200ms")
         .getOrCreate())  # fmt: skip
spark.sparkContext.setLogLevel("ERROR")


@F.udf("string")
def flaky(v: int) -> str:
    tc = TaskContext.get()
    if tc.attemptNumber() == 0:
        p = tc.partitionId()
        if p % 2 == 0 and v % 1000 == 300:
            raise RuntimeError(f"injected failure in the first attempt of partition {p}")
        if p == 1 and v % 1000 == 500:
            time.sleep(4)  # slow: a speculative copy of this task runs meanwhile
    return f"row-{v}"


df = spark.range(0, rows, numPartitions=4).select(flaky(F.col("id")).alias("value"))
df.write.format("logsource").option("bootstrap.servers", bootstrap).option("topic", "eos_batch").mode("append").save()
print("WROTE", flush=True)
spark.stop()
