"""`python -m sleuth` runs the sleuth command line."""

import sys

from sleuth.app.cli import main

sys.exit(main())
