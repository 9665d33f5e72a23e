"""``python -m pyspark_logsource.demo``: same as ``logsource demo``."""

import sys

from .run import main

sys.exit(main())
