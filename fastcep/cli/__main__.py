"""``python -m fastcep.cli``: the command line, as ``python -m fastcep``."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
