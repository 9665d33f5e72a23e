"""Driver of the exactly-once streaming test: logsource -> filter/explode -> logsource.

    python eos_stream_driver.py BOOTSTRAP CHECKPOINT run|drain

Input value ``n`` (an integer) gives ``n % 3`` outputs (0: filtered out); each output's
value is ``partition:offset:index`` of its input. ``run`` keeps the query going until
killed; ``drain`` processes what is there (Trigger.AvailableNow) and exits.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the support package

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from support.spark_jvm import driver_java_options  # noqa: E402

bootstrap, checkpoint, mode = sys.argv[1:4]
# the test starts this driver 11 times: a JVM that only JIT-compiles with C1 and collects with the serial GC
# starts with ~28% less CPU (measured 32.2 s -> 23.1 s for a drain run, driver + JVM + Python workers);
# the test session's class-data archive (tests/support/spark_jvm.py) roughly halves the JVM's share again
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.extraJavaOptions", driver_java_options())
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
src = (
    spark.readStream.format("logsource")
    .option("bootstrap.servers", bootstrap)
    .option("subscribe", "eos_in")
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "500" if mode == "run" else "1000000")
    .load()
)
n = F.col("value").cast("string").cast("int") % 3
out = (
    src.where(n > 0)
    .select("partition", "offset", F.explode(F.sequence(F.lit(0), n - 1)).alias("i"))
    .select(F.concat_ws(":", "partition", "offset", "i").alias("value"))
)
w = (
    out.writeStream.format("logsource")
    .option("bootstrap.servers", bootstrap)
    .option("topic", "eos_out")
    .option("checkpointLocation", checkpoint)
    .option("transaction.timeout.ms", "20000")
)
if mode == "drain":
    w.trigger(availableNow=True).start().awaitTermination()
else:
    print("STARTED", flush=True)
    w.trigger(processingTime="300 milliseconds").start().awaitTermination()
spark.stop()
