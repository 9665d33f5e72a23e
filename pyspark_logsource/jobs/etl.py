"""spark-submit entry point of the exactly-once load (the job itself is pyspark_logsource/etl/).

spark-submit pyspark_logsource/jobs/etl.py --bootstrap-servers H:P --subscribe clicks --output hdfs:///data/clicks
python -m pyspark_logsource.jobs.etl ...same options...
logsource etl ...same options...
"""

from __future__ import annotations

import sys

from pyspark_logsource.etl.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
