"""`python -m sleuth.app` runs the sleuth command line."""

import sys

from .cli import main

sys.exit(main())
