"""What every verb shares: ``UserError`` (an error of the user's input: one line, exit status 2)
and ``out`` (the result printed as text or, with ``--json``, as JSON)."""

import json
import sys


class UserError(Exception):
    """An error caused by the user's input: reported in one line, exit status 2."""


def out(args, payload, text):
    """Print ``payload`` as JSON with ``--json``, else ``text``."""
    if args.json:
        json.dump(payload, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(text)
