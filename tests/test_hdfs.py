"""A real HDFS (the session's MiniDFSCluster, ``hdfs`` fixture): Spark writes and reads ``hdfs://`` with the
Hadoop client pyspark ships. The exactly-once load's tests on ``hdfs://`` build on this fixture."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.hdfs, pytest.mark.spark]


def test_spark_writes_and_reads_hdfs(spark, hdfs):
    path = f"{hdfs.url}/smoke/parquet"
    spark.range(100).selectExpr("id", "cast(id * 2 as string) as v").write.mode("overwrite").parquet(path)
    back = spark.read.parquet(path)
    assert back.count() == 100
    assert sorted(r.v for r in back.where("id < 3").collect()) == ["0", "2", "4"]
