"""Pieces of the Spark data source that need no SparkSession: options, planning, Arrow conversion."""
