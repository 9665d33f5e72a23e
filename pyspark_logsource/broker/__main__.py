"""``python -m pyspark_logsource.broker --config FILE [--override k=v ...]``."""

import sys

from .server import main

sys.exit(main())
