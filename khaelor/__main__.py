"""`python -m khaelor` runs the command line."""

import sys

from khaelor.cli import main

sys.exit(main())
