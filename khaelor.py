#!/usr/bin/env python3
"""Run KHAELOR from a checkout: `python khaelor.py ...` equals `khaelor ...`."""

import sys

from khaelor.cli import main

if __name__ == "__main__":
    sys.exit(main())
