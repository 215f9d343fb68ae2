"""Fresh environments for the install tests: where this interpreter's packages live."""

import os
import sys
import sysconfig


def parent_site_packages():
    """Every site-packages folder this interpreter imports from, its own first. A venv made with
    ``--system-site-packages`` keeps numpy and friends in the base interpreter's folder, which
    ``sysconfig`` does not name."""
    own = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    found = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    return [p for p in dict.fromkeys(own + found) if os.path.isdir(p)]
