"""`python -m sleuth` runs the sleuth command line."""

import sys

from .app.cli import main

sys.exit(main())
