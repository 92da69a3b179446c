"""``python -m specinit``: the same command line as ``specinit``."""

import sys

from specinit.cli import main

sys.exit(main())
