"""``python -m pyspark_logsource.broker --config FILE [--override k=v ...]``."""

import sys

from .process import main

sys.exit(main())
