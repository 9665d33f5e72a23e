"""spark-submit entry points: the exactly-once ETL load (``etl.py``)."""
